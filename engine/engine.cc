// Engine: admission, the step loop, and per-token output handling (start-up: engine_startup.cc;
// speculation's per-step work: engine_speculation.cc).
#include "engine/engine.h"

#include <algorithm>
#include <exception>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/exception_message.h"
#include "engine/engine_stream.h"
#include "engine/sampler.h"
#include "engine/stop_checker.h"
#include "structured/matcher.h"
#include "tokenizer/incremental_detokenizer.h"

namespace ls {
namespace {

// The error of requests the server itself cancels as it stops.
constexpr const char* kShutdownReason = "the server is shutting down and cancelled the request";

}  // namespace

using Clock = std::chrono::steady_clock;

Engine::~Engine() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (loop_.joinable()) loop_.join();  // not started when the warm-up failed
}

absl::Status Engine::CheckContextLength(int64_t prompt_tokens, int64_t max_tokens) const {
  if (max_tokens <= 0 && prompt_tokens >= max_model_len_)
    return absl::InvalidArgumentError(absl::StrCat("the prompt is ", prompt_tokens,
                                                   " tokens long, which leaves no room to generate within this "
                                                   "model's context length of ",
                                                   max_model_len_, " tokens"));
  if (max_tokens > 0 && prompt_tokens + max_tokens > max_model_len_)
    return absl::InvalidArgumentError(absl::StrCat("prompt (", prompt_tokens, " tokens) + max_tokens (", max_tokens,
                                                   ") exceeds this model's context length of ", max_model_len_,
                                                   " tokens"));
  return absl::OkStatus();
}

absl::Status Engine::Validate(const Request& r) const {
  const int64_t V = model_->config().vocab_size;
  if (r.prompt_ids.empty()) return absl::InvalidArgumentError("prompt must not be empty");
  for (int32_t id : r.prompt_ids)
    if (id < 0 || id >= V)
      return absl::InvalidArgumentError(absl::StrCat("prompt token id ", id, " is outside the vocabulary [0, ", V, ")"));
  if (auto s = r.params.Validate(V, config_.max_logprobs); !s.ok()) return s;
  if (auto s = CheckContextLength(static_cast<int64_t>(r.prompt_ids.size()), r.params.max_tokens); !s.ok()) return s;
  const int64_t total = static_cast<int64_t>(r.prompt_ids.size()) + r.params.max_tokens;
  if ((total + config_.block_size - 1) / config_.block_size > blocks_.pool_blocks())
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt + max_tokens (", total, " tokens) does not fit the KV cache (",
        blocks_.pool_blocks() * config_.block_size, " tokens", group_->size() > 1 ? " per rank" : "", ")"));
  if (!r.params.stop.empty() && !tokenizer_)
    return absl::InvalidArgumentError("stop strings need a tokenizer, and this model has none");
  return absl::OkStatus();
}

absl::Status Engine::CheckIntake(const std::string& id, int32_t more) const {
  if (stop_ || draining_) return absl::UnavailableError("the server is shutting down");
  if (live_ids_.count(id)) return absl::AlreadyExistsError(absl::StrCat("request id '", id, "' is already in use"));
  if (queued_ + more >= config_.max_waiting)
    return absl::ResourceExhaustedError(absl::StrCat("the waiting queue is full (", config_.max_waiting, " requests)"));
  return absl::OkStatus();
}

void Engine::Enqueue(Request request, OutputCallback on_output) {
  auto s = std::make_unique<Stream>();
  s->arrival = Clock::now();
  s->seq.priority = request.priority;
  s->seq.table.salt = request.cache_salt;
  s->seq.tokens = request.prompt_ids;
  s->seq.num_prompt_tokens = static_cast<int32_t>(request.prompt_ids.size());
  s->seq.reuse_cached_prefix = !request.params.prompt_logprobs;
  s->rng.seed(request.params.seed ? *request.params.seed : std::random_device{}());
  if (tokenizer_)
    s->detok = std::make_unique<tok::IncrementalDetokenizer>(tokenizer_, request.params.skip_special_tokens);
  s->stop = std::make_unique<StopChecker>(request.params.stop, request.params.include_stop_str_in_output);
  if (request.params.grammar)
    s->matcher = request.params.grammar_state >= 0
                     ? std::make_unique<structured::Matcher>(request.params.grammar, request.params.grammar_state)
                     : std::make_unique<structured::Matcher>(request.params.grammar);
  s->on_output = std::move(on_output);
  s->request = std::move(request);
  live_ids_.insert(s->request.id);
  ++queued_;
  inbox_.push_back(std::move(s));
}

absl::Status Engine::Submit(Request request, OutputCallback on_output) {
  std::vector<Request> one;
  one.push_back(std::move(request));
  std::vector<OutputCallback> callback;
  callback.push_back(std::move(on_output));
  return SubmitAll(std::move(one), std::move(callback));
}

absl::Status Engine::SubmitAll(std::vector<Request> requests, std::vector<OutputCallback> on_output) {
  absl::Status st = requests.size() == on_output.size()
                        ? absl::OkStatus()
                        : absl::InvalidArgumentError("SubmitAll: one callback per request");
  if (st.ok() && static_cast<int64_t>(requests.size()) > config_.max_waiting)  // would wait for a queue it cannot fit
    st = absl::InvalidArgumentError(absl::StrCat(
        "this request's ", requests.size(), " sequences (its prompts times n) are more than the waiting queue holds (",
        config_.max_waiting, "): it could never be queued"));
  for (size_t i = 0; i < requests.size() && st.ok(); ++i) {
    st = Validate(requests[i]);
    for (size_t j = 0; j < i && st.ok(); ++j)
      if (requests[j].id == requests[i].id)
        st = absl::AlreadyExistsError(absl::StrCat("request id '", requests[i].id, "' is already in use"));
  }
  if (st.ok()) {
    MutexLock lock(&mu_);
    for (size_t i = 0; i < requests.size() && st.ok(); ++i) st = CheckIntake(requests[i].id, static_cast<int32_t>(i));
    if (st.ok())
      for (size_t i = 0; i < requests.size(); ++i) Enqueue(std::move(requests[i]), std::move(on_output[i]));
  }
  if (!st.ok()) {
    metrics_.Update([](MetricsSnapshot& m) { ++m.rejected; });
    return st;
  }
  cv_.SignalAll();
  return absl::OkStatus();
}

void Engine::RequestExpertReplan() {
  balancer_->RequestReplan();
  {
    MutexLock lock(&mu_);
    wake_ = true;
  }
  cv_.SignalAll();
}

void Engine::Cancel(const std::string& id, std::string reason) {
  {
    MutexLock lock(&mu_);
    cancels_.emplace_back(id, std::move(reason));
  }
  cv_.SignalAll();
}

size_t Engine::num_live_requests() const {
  MutexLock lock(&mu_);
  return live_ids_.size();
}

absl::Status Engine::failure() const {
  MutexLock lock(&mu_);
  return failure_;
}

void Engine::Fail(const absl::Status& why, FinishReason finish, const std::string& reason) {
  {
    MutexLock lock(&mu_);
    failure_ = why;
    stop_ = true;  // the loop ends after this
  }
  draining_ = true;  // intake closes; /ready turns false
  failed_ = true;
  TakeInbox();
  std::vector<Stream*> live;
  for (auto& [id, s] : streams_) live.push_back(s.get());
  for (Stream* s : live) Finish(s, finish, reason);
  UpdateGauges();
}

void Engine::FailGroup(const absl::Status& why) {
  Fail(
      why, FinishReason::kCancelled,
      absl::StrCat("the server's rank group failed and the server is stopping (", why.message(), "); retry elsewhere"));
}

bool Engine::Drain(std::chrono::milliseconds timeout) {
  draining_ = true;
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (num_live_requests() == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<std::string> ids;
  {
    MutexLock lock(&mu_);
    ids.assign(live_ids_.begin(), live_ids_.end());
  }
  for (const auto& id : ids) Cancel(id, kShutdownReason);
  while (num_live_requests() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return false;
}

MetricsSnapshot Engine::Metrics() const {
  MetricsSnapshot m = metrics_.Snapshot();
  return m;
}

void Engine::TakeInbox() {
  std::vector<std::unique_ptr<Stream>> in;
  std::vector<std::pair<std::string, std::string>> cancels;
  {
    MutexLock lock(&mu_);
    in.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (auto& s : in) {
    s->seq.arrival = next_arrival_++;
    scheduler_.Add(&s->seq);
    by_seq_[&s->seq] = s.get();
    streams_[s->request.id] = std::move(s);
  }
  for (auto& [id, reason] : cancels) {
    auto it = streams_.find(id);
    if (it != streams_.end()) Finish(it->second.get(), FinishReason::kCancelled, std::move(reason));
  }
}

void Engine::Finish(Stream* s, FinishReason reason, std::string error) {
  scheduler_.Remove(&s->seq);
  if (proposer_) proposer_->Forget(s->seq.arrival);
  RequestOutput out;
  out.request_id = s->request.id;
  if (reason != FinishReason::kError && reason != FinishReason::kCancelled && s->detok) {
    // Release text held back at the end of the stream.
    bool stopped = false;
    out.text = s->stop->Push(s->detok->Finish(), &stopped);
    if (!stopped) out.text += s->stop->Flush();
  }
  out.finish_reason = reason;
  out.error = std::move(error);
  out.prompt_tokens = s->seq.num_prompt_tokens;
  out.completion_tokens = s->seq.num_output_tokens();
  out.cached_prompt_tokens = s->seq.prefix_cached_tokens;
  if (s->scheduled) out.queue_seconds = std::chrono::duration<double>(s->first_scheduled - s->arrival).count();
  if (s->seq.num_output_tokens() > 0)
    out.ttft_seconds = std::chrono::duration<double>(s->first_token - s->arrival).count();
  const auto now = Clock::now();
  metrics_.Update([&](MetricsSnapshot& m) {
    const int idx = reason == FinishReason::kStop ? 0 : reason == FinishReason::kLength ? 1
                    : reason == FinishReason::kCancelled ? 2 : 3;
    ++m.finished[idx];
    m.e2e.Observe(std::chrono::duration<double>(now - s->arrival).count());
  });
  UpdateGauges();  // so that a caller seeing the final output also sees the blocks freed
  const std::string id = s->request.id;
  const bool was_queued = s->counted_queued;
  OutputCallback cb = std::move(s->on_output);
  by_seq_.erase(&s->seq);
  streams_.erase(id);  // s is gone from here on
  {
    MutexLock lock(&mu_);
    live_ids_.erase(id);
    if (was_queued) --queued_;
  }
  if (cb) cb(std::move(out));
}

bool Engine::HandleToken(Stream* s, float* logits, bool greedy_record, int32_t draft, bool* accepted) {
  if (accepted) *accepted = false;
  const ModelConfig& mc = model_->config();
  const SamplingParams& p = s->request.params;
  const int32_t vocab = static_cast<int32_t>(mc.vocab_size);
  Clock::time_point g0;
  if (s->matcher) {
    // Structured output: only the tokens the grammar allows next; the end tokens only where it may end.
    g0 = Clock::now();
    std::vector<int32_t> ends = p.stop_token_ids;
    if (!p.ignore_eos) ends.insert(ends.end(), eos_ids_.begin(), eos_ids_.end());
    if (!s->matcher->MaskLogits(logits, vocab, ends)) {
      Finish(s, FinishReason::kError, "the output grammar allows no token here");
      return false;
    }
    step_grammar_seconds_ += std::chrono::duration<double>(Clock::now() - g0).count();
  }
  SampleResult r = greedy_record
                       ? Sampler::FromGreedyRecord(logits, p, draft)
                       : Sampler::Sample(logits, vocab, p, s->seq.tokens, s->seq.num_prompt_tokens, &s->rng, draft);
  if (r.token_id < 0) {  // every logit NaN (or −∞): the model's numbers broke on this sequence
    Finish(s, FinishReason::kError,
           "the model's logits are not finite for any token at this step (its weights or activations overflowed)");
    return false;
  }
  if (accepted) *accepted = r.accepted;
  // An end token leaves the grammar's place as it is; any other token advances it.
  bool grammar_done = false;
  if (s->matcher) {
    g0 = Clock::now();
    grammar_done = s->matcher->Accept(r.token_id) && s->matcher->finished();
    step_grammar_seconds_ += std::chrono::duration<double>(Clock::now() - g0).count();
    ++step_grammar_tokens_;
  }
  s->seq.tokens.push_back(r.token_id);
  const auto now = Clock::now();
  const bool first = s->seq.num_output_tokens() == 1;
  metrics_.Update([&](MetricsSnapshot& m) {
    ++m.generation_tokens;
    if (first) {
      m.ttft.Observe(std::chrono::duration<double>(now - s->arrival).count());
    } else {
      m.inter_token.Observe(std::chrono::duration<double>(now - s->last_token).count());
    }
  });
  if (first) s->first_token = now;
  s->last_token = now;

  RequestOutput out;
  out.request_id = s->request.id;
  out.token_ids = {r.token_id};
  if (r.has_logprobs) out.logprobs.push_back(std::move(r.logprob));
  if (p.prompt_logprobs && !s->prompt_logprobs_sent) {
    out.prompt_logprobs = std::move(s->prompt_logprobs);
    s->prompt_logprobs_sent = true;
  }
  out.prompt_tokens = s->seq.num_prompt_tokens;
  out.completion_tokens = s->seq.num_output_tokens();

  const bool may_stop = s->seq.num_output_tokens() > p.min_tokens;
  bool is_stop_token = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), r.token_id) != p.stop_token_ids.end();
  if (!p.ignore_eos) is_stop_token |= std::find(eos_ids_.begin(), eos_ids_.end(), r.token_id) != eos_ids_.end();
  if (is_stop_token && may_stop) {
    s->on_output(std::move(out));  // the stop token's text is not emitted
    Finish(s, FinishReason::kStop);
    return false;
  }
  bool stopped = false;
  if (s->detok) {
    auto piece = s->detok->Push(r.token_id);
    if (!piece.ok()) {
      Finish(s, FinishReason::kError, std::string(piece.status().message()));
      return false;
    }
    out.text = s->stop->Push(*piece, &stopped);
    if (stopped && !may_stop) {
      stopped = false;  // too early to stop: emit the text unchanged
      out.text += s->stop->Flush();
    }
  }
  s->on_output(std::move(out));
  if (stopped || grammar_done) {  // grammar_done: the grammar allows nothing more
    Finish(s, FinishReason::kStop);
    return false;
  }
  if (s->seq.num_output_tokens() >= p.max_tokens || s->seq.num_tokens() >= max_model_len_) {
    Finish(s, FinishReason::kLength);
    return false;
  }
  return true;
}

void Engine::CollectPromptLogprobs(Stream* s, int32_t start, int32_t n, const float* logits) {
  const int32_t V = static_cast<int32_t>(model_->config().vocab_size);
  const int32_t prompt = s->seq.num_prompt_tokens;
  s->prompt_logprobs.resize(std::max(prompt - 1, 0));
  for (int32_t j = 0; j < n && start + j + 1 < prompt; ++j)
    s->prompt_logprobs[start + j] = Sampler::Logprobs(logits + static_cast<int64_t>(j) * V, V,
                                                      s->seq.tokens[start + j + 1], *s->request.params.prompt_logprobs);
}

void Engine::RunStep(const SchedulerPlan& plan, Clock::time_point t0) {
  // Each sequence runs on the rank whose cache holds its blocks (its pool), with that cache's own
  // block and slot numbers.
  const int32_t ranks = group_->size();
  std::vector<StepBatch> batches(ranks);
  struct Where {
    int32_t rank;
    size_t seq;   // index in that rank's batch
    int64_t row;  // where its first logits row starts there (floats)
  };
  std::vector<Where> where(plan.items.size());
  std::vector<int64_t> next_row(ranks, 0);
  const bool greedy_records = config_.greedy_on_backend && model_->config().vocab_size < kMaxGreedyVocab;
  std::vector<int64_t> first_token(plan.items.size());  // in its rank's batch
  for (size_t i = 0; i < plan.items.size(); ++i) {
    Sequence* seq = plan.items[i].seq;
    const int32_t r = seq->table.pool;
    StepSequence ss;
    ss.num_tokens = plan.items[i].num_tokens;
    ss.start_pos = seq->num_computed;
    ss.block_table = seq->table.blocks;
    for (int32_t& b : ss.block_table) b -= r * blocks_.pool_blocks();
    ss.want_logits = plan.items[i].sample;
    ss.state_slot = seq->state_slot < 0 ? -1 : seq->state_slot - r * slots_.pool_slots();
    // A draft is verified from the logits of every position: after the last token and after each draft token.
    if (by_seq_.at(seq)->WantsPromptRows() || plan.items[i].num_draft > 0) ss.all_logits = ss.want_logits = true;
    ss.greedy = greedy_records && by_seq_.at(seq)->Greedy();
    ss.greedy_logprob = ss.greedy && by_seq_.at(seq)->request.params.logprobs.has_value();
    StepBatch& batch = batches[r];
    where[i] = {r, batch.seqs.size(), next_row[r]};
    next_row[r] += StepBatch::logit_rows(ss) * StepBatch::logit_row_floats(ss, model_->config().vocab_size);
    const int32_t own = ss.num_tokens - plan.items[i].num_draft;
    first_token[i] = static_cast<int64_t>(batch.tokens.size());
    batch.tokens.insert(batch.tokens.end(), seq->tokens.begin() + seq->num_computed,
                        seq->tokens.begin() + seq->num_computed + own);
    batch.tokens.insert(batch.tokens.end(), seq->draft.begin(), seq->draft.begin() + plan.items[i].num_draft);
    batch.seqs.push_back(std::move(ss));
  }
  for (const PoolCopy& c : plan.copies) batches[c.pool].copies.push_back(c.copy);
  // Recurrent state and speculation: a state taken back after a rejection, and the state of a
  // sequence about to verify a draft kept in its spare slot (after the copies above, which may
  // restore a prefix's snapshot into its slot).
  if (spare_slot_base_ >= 0) {
    for (Sequence* seq : plan.preempted) by_seq_.at(seq)->take_back_state = false;  // recomputed anyway
    for (const ScheduledSeq& item : plan.items) {
      Sequence* seq = item.seq;
      Stream* s = by_seq_.at(seq);
      if (seq->state_slot < 0) continue;
      const int32_t r = seq->table.pool, slot = seq->state_slot - r * slots_.pool_slots();
      if (s->take_back_state) batches[r].copies.push_back({CacheCopy::kState, spare_slot_base_ + slot, slot});
      s->take_back_state = false;
      if (item.num_draft > 0) batches[r].copies.push_back({CacheCopy::kState, slot, spare_slot_base_ + slot});
    }
  }
  const auto m0 = Clock::now();
  const bool want_hidden = proposer_ && proposer_->wants_hidden();
  absl::Status st = group_->Step(batches, cache_, &logits_, want_hidden ? &hidden_ : nullptr);
  const auto m1 = Clock::now();
  if (absl::IsUnavailable(st) && group_->num_processes() > 1) {
    FailGroup(st);
    return;
  }
  // Streams of this step, looked up before any of them can finish.
  std::vector<Stream*> streams;
  for (const ScheduledSeq& item : plan.items) streams.push_back(by_seq_.at(item.seq));
  if (!st.ok()) {
    for (Stream* s : streams) Finish(s, FinishReason::kError, absl::StrCat("model step failed: ", st.message()));
    return;
  }
  // The step's expert load in the window before any of its tokens reaches a client (the
  // since-start counts reach the metrics through Finish's UpdateGauges).
  balancer_->RecordStepLoad();
  // A proposer reading the target's hidden rows (from every rank) gets every sequence's, before
  // the verification below changes what its tokens are.
  if (want_hidden) {
    const int64_t d = model_->config().hidden_size;
    for (size_t i = 0; i < plan.items.size(); ++i) {
      const StepSequence& ss = batches[where[i].rank].seqs[where[i].seq];
      proposer_->ObserveHidden(plan.items[i].seq->arrival, ss.start_pos, ss.num_tokens,
                               hidden_[where[i].rank].data() + first_token[i] * d);
    }
  }
  scheduler_.OnStepDone(plan);
  const int64_t V = model_->config().vocab_size;
  uint64_t spec_steps = 0, spec_draft_tokens = 0, spec_accepted_tokens = 0;  // added to the metrics once
  for (size_t i = 0; i < plan.items.size(); ++i) {
    Stream* s = streams[i];
    if (!s->scheduled) {
      s->scheduled = true;
      s->first_scheduled = t0;
      metrics_.Update([&](MetricsSnapshot& m) {
        m.queue_time.Observe(std::chrono::duration<double>(t0 - s->arrival).count());
        m.prompt_tokens += s->seq.num_prompt_tokens;
        if (s->seq.prefix_cached_tokens > 0) ++m.prefix_hit_requests;
      });
      MutexLock lock(&mu_);
      --queued_;
      s->counted_queued = false;
    }
    const StepSequence& ss = batches[where[i].rank].seqs[where[i].seq];
    const int64_t rows = StepBatch::logit_rows(ss);
    const LogitRows at{logits_[where[i].rank].data() + where[i].row, StepBatch::logit_row_floats(ss, V), ss.greedy};
    const int32_t draft = plan.items[i].num_draft;
    if (draft > 0) {
      ++spec_steps;
      spec_draft_tokens += draft;
      spec_accepted_tokens += VerifyDraft(s, draft, at);
      continue;
    }
    if (ss.all_logits && !ss.greedy) CollectPromptLogprobs(s, ss.start_pos, ss.num_tokens, at.data);
    if (plan.items[i].sample) HandleToken(s, at.row(rows - 1), ss.greedy);
  }
  const auto t1 = Clock::now();
  const bool switching = balancer_->TakeSwitching();
  metrics_.Update([&](MetricsSnapshot& m) {
    if (switching) m.longest_switch_step_seconds = std::max(m.longest_switch_step_seconds,
                                                            std::chrono::duration<double>(t1 - t0).count());
    ++m.steps;
    m.tokens_per_step.Observe(plan.num_tokens);
    m.preemptions += plan.preempted.size();
    m.model_seconds += std::chrono::duration<double>(m1 - m0).count();
    m.step_seconds += std::chrono::duration<double>(t1 - t0).count();
    m.grammar_seconds += step_grammar_seconds_;
    m.grammar_tokens += step_grammar_tokens_;
    m.spec_steps += spec_steps;
    m.spec_draft_tokens += spec_draft_tokens;
    m.spec_accepted_tokens += spec_accepted_tokens;
  });
  step_grammar_seconds_ = 0;
  step_grammar_tokens_ = 0;
}

void Engine::UpdateGauges() {
  metrics_.Update([&](MetricsSnapshot& m) {
    m.running = static_cast<int64_t>(scheduler_.num_running());
    m.waiting = static_cast<int64_t>(scheduler_.num_waiting());
    m.kv_blocks_used = blocks_.num_used() - blocks_.num_held_only();  // held by snapshots alone: given back on demand
    m.state_slots_used = slots_.num_used();
    m.prefix_queried_tokens = blocks_.prefix_queried_tokens();
    m.prefix_hit_tokens = blocks_.prefix_hit_tokens();
    m.snapshots_held = snapshots_.num_held();
    m.snapshots_taken = snapshots_.num_taken();
    m.snapshot_evictions = snapshots_.num_evicted();
    m.expert_tokens = model_->expert_token_counts();
    m.device_rows = model_->device_row_counts();
  });
}

void Engine::RunPass(bool idle) {
  balancer_->BeforeStep();
  if (idle) {  // nothing to run for a while: the ranks check on each other
    if (absl::Status st = group_->Idle(); !st.ok()) FailGroup(st);
    return;
  }
  TakeInbox();
  const auto s0 = Clock::now();
  ProposeDrafts();
  SchedulerPlan plan = scheduler_.Schedule();
  if (!plan.empty()) {
    RunStep(plan, s0);
    if (failed_) return;
    balancer_->AfterStep();
  } else if (!streams_.empty()) {
    // Live sequences but nothing schedulable (cannot happen with admission checks); avoid spinning.
    MutexLock lock(&mu_);
    cv_.WaitFor(std::chrono::milliseconds(1));
  }
  UpdateGauges();
}

void Engine::Loop() {
  for (;;) {
    bool idle = false;
    // A budgeted re-plan's copy goes on while nothing runs (a chunk per pass, no wait).
    const std::chrono::milliseconds wait = balancer_->IdleWait(group_->idle_interval());
    {
      MutexLock lock(&mu_);
      if (stop_) break;
      if (streams_.empty() && inbox_.empty() && cancels_.empty())
        idle = !cv_.WaitFor(wait, [&] {
          mu_.AssertHeld();
          return stop_ || wake_ || !inbox_.empty() || !cancels_.empty();
        });
      if (stop_) break;
      wake_ = false;
    }
    // An exception out of a pass is a fault of the server's (a kernel, the sampler, a grammar...):
    // what the step left half done cannot be trusted, so the engine fails rather than the process
    // aborting, every request is answered, and the process ends (on_failure).
    std::exception_ptr thrown;
    try {
      RunPass(idle);
    } catch (...) {
      thrown = std::current_exception();
    }
    if (thrown) {
      const absl::Status why = absl::InternalError(absl::StrCat("an engine step threw: ", ExceptionMessage(thrown)));
      Fail(why, FinishReason::kError,
           absl::StrCat("the engine failed and the server is stopping (", why.message(), "); retry elsewhere"));
    }
    if (failed_) break;
  }
  // Shutdown: cancel everything still live.
  TakeInbox();
  std::vector<Stream*> left;
  for (auto& [id, s] : streams_) left.push_back(s.get());
  for (Stream* s : left) Finish(s, FinishReason::kCancelled, kShutdownReason);
  if (failed_ && config_.on_failure) config_.on_failure(failure());
}

OutputCallback OutputQueue::Callback() {
  return [this](RequestOutput o) {
    // Notify under the lock: a reader that sees the final output may destroy the queue as soon as
    // it can take the lock, so the notification must be finished by then.
    MutexLock lock(&mu_);
    items_.push_back(std::move(o));
    cv_.SignalAll();
  };
}

RequestOutput OutputQueue::Next() {
  MutexLock lock(&mu_);
  cv_.Wait([&] {
    mu_.AssertHeld();
    return !items_.empty();
  });
  RequestOutput o = std::move(items_.front());
  items_.erase(items_.begin());
  return o;
}

std::optional<RequestOutput> OutputQueue::NextFor(std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  if (!cv_.WaitFor(timeout, [&] {
        mu_.AssertHeld();
        return !items_.empty();
      }))
    return std::nullopt;
  RequestOutput o = std::move(items_.front());
  items_.erase(items_.begin());
  return o;
}

RequestOutput OutputQueue::WaitFinal() {
  RequestOutput all;
  for (;;) {
    RequestOutput o = Next();
    all.request_id = o.request_id;
    all.token_ids.insert(all.token_ids.end(), o.token_ids.begin(), o.token_ids.end());
    all.text += o.text;
    for (auto& l : o.logprobs) all.logprobs.push_back(std::move(l));
    for (auto& l : o.prompt_logprobs) all.prompt_logprobs.push_back(std::move(l));
    all.prompt_tokens = o.prompt_tokens;
    all.completion_tokens = o.completion_tokens;
    all.cached_prompt_tokens = o.cached_prompt_tokens;
    if (o.finished()) {
      all.finish_reason = o.finish_reason;
      all.error = o.error;
      return all;
    }
  }
}

}  // namespace ls
