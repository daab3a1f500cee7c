// Engine: the in-process serving core the front ends call. Submit() queues a request and streams
// its outputs through a callback; Cancel() stops one; a single background loop thread runs
// scheduler → model step → sampling → detokenization → stop checks. Thread-safe typed queues
// sit between callers and the loop. A failing request finishes with an error and never takes
// others down.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "engine/block_manager.h"
#include "engine/draft_proposer.h"
#include "engine/expert_balancer.h"
#include "engine/local_rank_group.h"
#include "engine/metrics.h"
#include "engine/rank_group.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "models/kv_cache.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace ls {

struct EngineConfig {
  SchedulerConfig scheduler;
  int32_t block_size = 16;
  int32_t num_kv_blocks = 0;                 // 0: kv_cache_bytes decides
  size_t kv_cache_bytes = size_t{512} << 20;
  // Above 0: kv_cache_bytes is instead what this fraction of the backend's device memory leaves
  // once the weights are loaded and the largest step has run (engine/device_memory_budget.h); for
  // backends with memory of their own (CUDA).
  double gpu_memory_utilization = 0;
  // KV cache elements: float32, or BF16 where the backend supports it (CPU and CUDA). Unset:
  // BF16 for BF16 checkpoints where supported, else float32.
  std::optional<DType> kv_cache_dtype;
  bool enable_prefix_caching = true;
  // Models with recurrent (KDA) layers cache prefixes with state snapshots (engine/state_snapshots.h):
  // bytes for them in each rank's cache, out of kv_cache_bytes (< 0: a quarter of it; 0: no prefix
  // caching for such models), and a snapshot every that many prompt tokens (a multiple of
  // block_size; 0: only where a prompt leaves the cached prefixes and where it ends).
  int64_t state_cache_bytes = -1;
  int32_t state_snapshot_interval = 512;
  // Speculative decoding (engine/draft_proposer.h); num_speculative_tokens 0: off. On models with
  // recurrent layers each running sequence's state has a spare slot (out of kv_cache_bytes) to be
  // taken back from after a rejection. A draft model's KV cache comes out of kv_cache_bytes too:
  // both caches hold the same number of tokens (with num_kv_blocks set, the draft's has as many
  // blocks).
  SpeculativeConfig speculative;
  int32_t max_waiting = 1024;                // admission limit: queued, not yet running
  int32_t max_model_len = 0;                 // 0: the model's max_position_embeddings
  int32_t max_logprobs = 20;
  // Greedy requests that need no more than the chosen token (StepSequence::greedy) have their rows
  // reduced to it by the model, on its backend: on a GPU only an id per row crosses to the host.
  bool greedy_on_backend = true;
  // Run the largest step the scheduler can plan once at creation, on dummy tokens: the step's
  // buffers reach their full size then (a backend short of memory fails Create, naming the step,
  // rather than a request under load), and the first large batch does not pay for their growth.
  bool warmup = true;

  // Expert parallelism (docs/serving.md, "Expert placement").
  ExpertBalancerConfig experts;

  // The processes the model's steps run on (dist/: rank 0 is this process, which schedules and
  // samples for all); it must outlive the engine. Null: this process alone. With several ranks,
  // each keeps the KV cache of its own sequences (kv_cache_bytes each) and the experts are placed
  // over them.
  RankGroup* ranks = nullptr;
  // Called once, on the loop thread, when the engine fails for good: the rank group broke (a rank
  // died or stopped answering; every live request is answered as cancelled by the server, 503 /
  // UNAVAILABLE), or a step threw (a fault of the server's: each is answered as failed, 500 /
  // INTERNAL, naming it). By then intake is closed and no further step runs; the process is
  // expected to exit non-zero.
  std::function<void(const absl::Status&)> on_failure;
};

class Engine {
 public:
  // The model (and tokenizer, which may be null: then no text and no stop strings) must outlive
  // the engine, and a model serves one engine at a time (the engine owns its mutable state:
  // expert placement, counters).
  static absl::StatusOr<std::unique_ptr<Engine>> Create(Model* model, const tok::Tokenizer* tokenizer,
                                                        EngineConfig config);
  ~Engine();

  // Queues a request. Errors: InvalidArgument (naming the field), AlreadyExists (live id),
  // ResourceExhausted (waiting queue full), Unavailable (draining or stopped).
  absl::Status Submit(Request request, OutputCallback on_output);
  // Queues several requests at once, so that the next step sees them all (one callback each), or
  // none: the first that cannot be queued is the error.
  absl::Status SubmitAll(std::vector<Request> requests, std::vector<OutputCallback> on_output);
  // Cancels a live request: its final output has FinishReason::kCancelled and `reason` as its
  // error (empty for a client's own cancellation; the server's reason otherwise, such as a
  // shutdown). Unknown ids are ignored.
  void Cancel(const std::string& request_id, std::string reason = {});
  // Stops intake, waits up to `timeout` for in-flight requests, then cancels what is left.
  // Returns true when everything finished in time.
  bool Drain(std::chrono::milliseconds timeout);

  MetricsSnapshot Metrics() const;
  // Expert-load statistics over the window as JSON (per MoE layer, tokens per expert).
  std::string ExpertLoadJson() const { return balancer_->ExpertLoadJson(); }
  // The same window as data (tokens per expert per MoE layer, its extent in steps and time); any thread.
  ExpertLoadWindowSnapshot ExpertWindow() const { return balancer_->WindowSnapshot(); }
  // The expert placement in use, as JSON loadable as EngineConfig::experts.placement_json
  // (empty when expert parallelism is off). Call when no step runs (e.g. after Drain).
  std::string PlacementJson() const { return balancer_->PlacementJson(); }
  // Plans an expert placement from the load window now and switches to it as a re-plan does
  // (MetricsSnapshot::replans counts the switch); the window starts afresh after it. Any thread.
  void RequestExpertReplan();
  // Forgets the expert load counted so far: the window starts afresh before the next step (what
  // ran before the call is not counted; call between steps that should not mix). Any thread.
  void ForgetExpertLoad() { balancer_->RequestClearWindow(); }
  size_t num_live_requests() const;
  bool draining() const { return draining_.load(); }
  // Whether the engine failed for good, its rank group broken or a step thrown (then draining()
  // too); failure() says how.
  bool failed() const { return failed_.load(); }
  absl::Status failure() const;
  int32_t num_ranks() const { return group_->size(); }
  const ModelConfig& model_config() const { return model_->config(); }
  const tok::Tokenizer* tokenizer() const { return tokenizer_; }
  int32_t max_model_len() const { return max_model_len_; }
  // The context-length check, worded once for every front end: InvalidArgument unless a prompt of
  // `prompt_tokens` leaves room in max_model_len() for `max_tokens` new tokens (0: for at least one).
  absl::Status CheckContextLength(int64_t prompt_tokens, int64_t max_tokens) const;
  // KV blocks of all ranks together (each rank's cache holds num_kv_blocks() / num_ranks()).
  int32_t num_kv_blocks() const { return blocks_.num_blocks(); }
  // Recurrent-state slots (one per running sequence; 0 for models without recurrent layers).
  int32_t num_state_slots() const { return slots_.num_slots(); }
  // Whether prefix caching is on: as configured, unless a model with recurrent layers has no
  // room for a single state snapshot.
  bool prefix_caching() const { return config_.enable_prefix_caching; }
  // State snapshot slots of all ranks together (0 for models without recurrent layers), and the
  // bytes each takes.
  int32_t num_snapshot_slots() const { return snapshots_.slots_per_pool() * group_->size(); }
  // Tokens proposed per step by speculative decoding (0: off, as configured or for this model), and how.
  int32_t num_speculative_tokens() const { return config_.speculative.num_speculative_tokens; }
  const char* speculative_method() const { return config_.speculative.method(); }
  const Model* draft_model() const { return config_.speculative.draft_model; }
  size_t snapshot_slot_bytes() const { return KvCache::BytesPerStateSlot(model_->kv_layout()); }
  int32_t kv_block_size() const { return blocks_.block_size(); }
  // Tokens the cache holds: blocks × tokens per block.
  int64_t kv_cache_tokens() const { return static_cast<int64_t>(blocks_.num_blocks()) * blocks_.block_size(); }
  DType kv_cache_dtype() const { return cache_.dtype(); }
  // Tokens and seconds of the creation warm-up step (0 without one).
  int64_t warmup_tokens() const { return warmup_tokens_; }
  double warmup_seconds() const { return warmup_seconds_; }

 private:
  struct Stream;
  // num_blocks, num_state_slots and num_snapshot_slots: each rank's.
  Engine(Model* model, const tok::Tokenizer* tokenizer, EngineConfig config, int32_t num_blocks,
         int32_t num_state_slots, int32_t num_snapshot_slots, int32_t num_spare_slots,
         std::unique_ptr<DraftProposer> proposer);

  absl::Status Warmup();
  void Loop();
  // One pass of the loop after its wait: a step (or, idle, the ranks' heartbeat), then the gauges.
  void RunPass(bool idle);
  void TakeInbox();
  void RunStep(const SchedulerPlan& plan, std::chrono::steady_clock::time_point start);
  // Samples a sequence's next token from its logits row and emits it; false when that finished the
  // stream (it is gone then). draft >= 0: the proposed token to verify, `accepted` says whether it was.
  // greedy_record: `logits` is the model's greedy record of the row (StepSequence::greedy).
  bool HandleToken(Stream* s, float* logits, bool greedy_record, int32_t draft = -1, bool* accepted = nullptr);
  // Speculative decoding: sets the draft of every decoding sequence that may have one (before scheduling),
  // and verifies one after the step from its num_draft + 1 logits rows, returning the
  // draft tokens accepted.
  void ProposeDrafts();
  // One sequence's logits rows in a step's results: rows of `stride` floats, greedy records or not.
  struct LogitRows {
    float* data;
    int64_t stride;
    bool greedy;
    float* row(int64_t j) const { return data + j * stride; }
  };
  int32_t VerifyDraft(Stream* s, int32_t num_draft, const LogitRows& logits);
  // After a rejection on a model with recurrent layers: the state goes back to its copy from
  // before the step, and the tokens since are computed again in the next one.
  void TakeBackState(Stream* s, int32_t accepted);
  // Prompt logprobs from the rows of positions start..start+n-1 ([n, vocab]).
  void CollectPromptLogprobs(Stream* s, int32_t start, int32_t n, const float* logits);
  void UpdateGauges();
  void Finish(Stream* s, FinishReason reason, std::string error = {});
  // The engine fails for good (see EngineConfig::on_failure): intake closes and every live
  // request is answered, `finish` with `reason` as its error; the loop ends.
  void Fail(const absl::Status& why, FinishReason finish, const std::string& reason);
  // The rank group broke.
  void FailGroup(const absl::Status& why);
  absl::Status Validate(const Request& r) const;
  // Submit's part under the lock: whether a request can be queued now, and queueing it.
  absl::Status CheckIntake(const std::string& id, int32_t more) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Enqueue(Request request, OutputCallback on_output) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Model* model_;
  const tok::Tokenizer* tokenizer_;
  EngineConfig config_;
  LocalRankGroup local_group_;
  RankGroup* group_;  // config_.ranks, or local_group_
  int32_t max_model_len_;
  KvCache cache_;
  // Speculation on a model with recurrent layers: each rank's cache holds, after the running
  // sequences' and the snapshots' slots, a spare slot per running-sequence slot (at this base plus
  // the sequence's rank-local slot) where its state is kept before a step that verifies a draft.
  // -1: none.
  int32_t spare_slot_base_;
  BlockManager blocks_;
  StateSlots slots_;
  StateSnapshots snapshots_;
  std::unique_ptr<DraftProposer> proposer_;  // null: speculation off
  Scheduler scheduler_;
  EngineMetrics metrics_;
  std::vector<int32_t> eos_ids_;
  // Structured output within the current step (loop thread), added to the metrics after it.
  double step_grammar_seconds_ = 0;
  int64_t step_grammar_tokens_ = 0;

  // Between callers and the loop.
  mutable Mutex mu_;
  CondVar cv_{&mu_};
  std::vector<std::unique_ptr<Stream>> inbox_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> cancels_ ABSL_GUARDED_BY(mu_);  // request id, reason
  std::unordered_set<std::string> live_ids_ ABSL_GUARDED_BY(mu_);
  int32_t queued_ ABSL_GUARDED_BY(mu_) = 0;  // submitted and not yet running or finished
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;  // an idle loop is to pass once (a re-plan was asked for)
  std::atomic<bool> draining_{false};
  std::atomic<bool> failed_{false};
  absl::Status failure_ ABSL_GUARDED_BY(mu_);

  // Owned by the loop thread.
  std::unordered_map<std::string, std::unique_ptr<Stream>> streams_;
  std::unordered_map<const Sequence*, Stream*> by_seq_;
  uint64_t next_arrival_ = 0;
  std::vector<std::vector<float>> logits_;  // [ranks] the step's logits rows; kept so memory is reused
  std::vector<std::vector<float>> hidden_;  // [ranks] the step's final hidden rows, for an MTP proposer
  int64_t warmup_tokens_ = 0;
  double warmup_seconds_ = 0;
  std::unique_ptr<ExpertBalancer> balancer_;

  std::thread loop_;
};

// A blocking reader over a request's outputs, for tests, tools and simple callers.
class OutputQueue {
 public:
  OutputCallback Callback();
  // Next output; blocks until one arrives.
  RequestOutput Next();
  // Next output, or nullopt after `timeout`.
  std::optional<RequestOutput> NextFor(std::chrono::milliseconds timeout);
  // Collects everything until the final output; returns it merged (all ids, all text).
  RequestOutput WaitFinal();

 private:
  Mutex mu_;
  CondVar cv_{&mu_};
  std::vector<RequestOutput> items_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ls
