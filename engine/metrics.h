// EngineMetrics: counters, gauges and latency histograms the engine records for the front ends
// (Prometheus exposition happens in server/). Thread-safe: written by the engine loop, read by
// any thread through Snapshot().
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/mutex.h"

namespace ls {

// Cumulative-bucket histogram with fixed upper bounds (seconds or counts).
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // per bucket, not cumulative; size bounds.size() + 1 (+Inf)
  double sum = 0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> b = {}) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void Observe(double v);
  // The q-quantile estimated from the buckets (upper bound of the bucket holding it).
  double Quantile(double q) const;
};

// One placement switch, kept so that the dashboard can mark it on its time axis.
struct ReplanEvent {
  double unix_seconds = 0;  // wall-clock time of the switch
  uint64_t step = 0;        // engine steps run before it
  double plan_seconds = 0;  // planning and copying the new replicas
  // Device load max/mean averaged over the MoE layers, expected from the loads the plan was made
  // from (each expert's tokens split evenly over its replicas), under the old and the new placement.
  double device_max_over_mean_before = 0, device_max_over_mean_after = 0;
  // Migration: slots (over all MoE layers and devices) whose expert changed, and the bytes copied
  // to build the new placement on every rank (each device's whole share is copied anew).
  int64_t moved_slots = 0;
  int64_t copied_bytes = 0;
  // Under a step budget (ExpertBalancerConfig::replan_step_budget_ms): the chunks the copy was
  // spread over, their time in all, and the longest one (what the switch added to one step). 0
  // when the placement was built whole in the background.
  int32_t chunks = 0;
  double migration_seconds = 0, max_chunk_seconds = 0;
};

// One chunk of a migration under a step budget: the slots copied before one step.
struct MigrationChunk {
  double unix_seconds = 0;  // wall-clock time the chunk ended
  uint64_t step = 0;        // engine steps run before it
  int32_t slots = 0;
  int64_t bytes = 0;
  double seconds = 0;
};

struct MetricsSnapshot {
  static constexpr size_t kMaxReplanEvents = 64;
  static constexpr size_t kMaxMigrationChunks = 256;

  // Requests finished, by reason: stop, length, cancelled, error.
  std::array<uint64_t, 4> finished{};
  uint64_t rejected = 0;         // refused at submission (validation or full queue)
  uint64_t prompt_tokens = 0;
  uint64_t generation_tokens = 0;
  uint64_t preemptions = 0;
  uint64_t steps = 0;
  Histogram queue_time, ttft, inter_token, e2e, tokens_per_step;
  int64_t running = 0, waiting = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  int32_t kv_block_size = 0;  // tokens per block
  int64_t state_slots_used = 0, state_slots_total = 0;  // recurrent-state slots (KDA layers)
  int64_t prefix_queried_tokens = 0, prefix_hit_tokens = 0;
  uint64_t prefix_hit_requests = 0;  // requests that found some of their prompt in the prefix cache
  // The prefix cache's recurrent-state snapshots (models with KDA layers): slots and their size,
  // snapshots held now, taken and evicted since the start.
  int64_t snapshot_slots_total = 0, snapshot_slot_bytes = 0, snapshots_held = 0;
  int64_t snapshots_taken = 0, snapshot_evictions = 0;
  // Speculative decoding: its method ("ngram", "draft_model"; empty: off), sequence-steps that
  // verified a draft, draft tokens proposed and accepted, time spent proposing, and proposer
  // failures (each leaves that step without drafts).
  std::string spec_method;
  uint64_t spec_steps = 0, spec_draft_tokens = 0, spec_accepted_tokens = 0;
  double spec_propose_seconds = 0;
  uint64_t spec_propose_errors = 0;
  double model_seconds = 0;  // time inside the model's forward
  double step_seconds = 0;   // whole step loop time while busy (scheduling, model, sampling, output)
  // Structured output: time spent masking logits with grammars and advancing the matchers, and the
  // tokens sampled under a grammar.
  double grammar_seconds = 0;
  uint64_t grammar_tokens = 0;
  int32_t num_layers = 0, num_experts = 0;
  std::vector<int32_t> moe_layers;     // the layers with routed experts, ascending
  std::vector<int64_t> expert_tokens;  // [layers * experts] tokens routed since start
  // Expert parallelism.
  int32_t num_ranks = 1;  // processes of the rank group (1: this process alone)
  int32_t num_devices = 0, slots_per_device = 0;
  // An initial placement planned from expected loads: the device max/mean it is expected to give
  // under them (mean over MoE layers), and what the uniform placement would (0: not planned so).
  double planned_device_max_over_mean = 0, uniform_device_max_over_mean = 0;
  // [ranks] memory each rank holds for its placed experts, and the part in redundant copies.
  std::vector<int64_t> rank_expert_bytes, rank_redundant_expert_bytes;
  std::vector<int64_t> device_rows;             // [layers * devices] rows since the last placement switch
  std::vector<std::vector<int32_t>> replica_map;  // [layers] slot -> expert (empty for dense layers)
  uint64_t replans = 0;
  double replan_seconds_total = 0, last_replan_seconds = 0;
  int64_t migration_bytes_total = 0, moved_slots_total = 0;  // sums of the switches' ReplanEvent figures
  double longest_switch_step_seconds = 0;        // longest step while re-planning or right after a switch
  std::vector<ReplanEvent> replan_events;        // the last kMaxReplanEvents switches, oldest first
  // Migrations under a step budget: time spent copying between steps, chunks, the longest chunk
  // (the worst delay a switch added to a step), and the last kMaxMigrationChunks chunks.
  double migration_seconds_total = 0, max_migration_chunk_seconds = 0;
  uint64_t migration_chunks_total = 0;
  std::vector<MigrationChunk> migration_chunks;
};

class EngineMetrics {
 public:
  EngineMetrics();
  MetricsSnapshot Snapshot() const;
  // Mutation under the lock: fn(MetricsSnapshot&).
  template <typename F>
  void Update(F&& fn) {
    MutexLock lock(&mu_);
    fn(m_);
  }

 private:
  mutable Mutex mu_;
  MetricsSnapshot m_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ls
