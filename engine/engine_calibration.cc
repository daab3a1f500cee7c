// PlanPlacementThroughEngine: the set as requests, then the re-plan and the wait for its switch.
#include "engine/engine_calibration.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"

namespace ls {
namespace {

// Counts the final outputs of the set's requests and keeps the first error. Shared with the
// callbacks, which may outlive a wait that timed out.
class Finished : public std::enable_shared_from_this<Finished> {
 public:
  explicit Finished(size_t expected) : expected_(expected), written_(expected) {}
  OutputCallback Callback(size_t index) {
    return [self = shared_from_this(), index](RequestOutput out) { self->Add(index, out); };
  }
  void Add(size_t index, const RequestOutput& out) {
    {
      MutexLock lock(&mu_);
      written_[index].insert(written_[index].end(), out.token_ids.begin(), out.token_ids.end());
      if (!out.finished()) return;
      tokens_ += out.prompt_tokens + out.completion_tokens;
      if (out.finish_reason == FinishReason::kError || out.finish_reason == FinishReason::kCancelled)
        if (error_.empty())
          error_ = absl::StrCat("calibration sequence ", index, ": ", FinishReasonName(out.finish_reason),
                                out.error.empty() ? "" : absl::StrCat(" (", out.error, ")"));
      ++done_;
    }
    cv_.SignalAll();
  }
  // Waits for every final output; false when `timeout` passed first.
  bool Wait(std::chrono::seconds timeout) {
    MutexLock lock(&mu_);
    return cv_.WaitFor(timeout, [&] {
      mu_.AssertHeld();
      return done_ == expected_;
    });
  }
  std::string error() {
    MutexLock lock(&mu_);
    return error_;
  }
  int64_t tokens() {
    MutexLock lock(&mu_);
    return tokens_;
  }
  // The tokens each request wrote (after Wait).
  std::vector<std::vector<int32_t>> written() {
    MutexLock lock(&mu_);
    return written_;
  }

 private:
  const size_t expected_;
  Mutex mu_;
  CondVar cv_{&mu_};
  size_t done_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::string error_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<int32_t>> written_ ABSL_GUARDED_BY(mu_);
};

// Submits `requests` and waits for every final output; the tokens each wrote. Their prompt and
// written tokens are added to *tokens where it is not null.
absl::StatusOr<std::vector<std::vector<int32_t>>> RunAll(Engine& engine, std::vector<Request> requests,
                                                         std::chrono::seconds timeout, int64_t* tokens) {
  const auto finished = std::make_shared<Finished>(requests.size());
  std::vector<OutputCallback> callbacks;
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].id = absl::StrCat("placement-calibration-", i);
    callbacks.push_back(finished->Callback(i));
  }
  if (absl::Status st = engine.SubmitAll(std::move(requests), std::move(callbacks)); !st.ok())
    return absl::Status(st.code(), absl::StrCat("calibration: ", st.message()));
  if (!finished->Wait(timeout))
    return absl::DeadlineExceededError(absl::StrCat("the calibration set did not finish in ", timeout.count(), " s"));
  if (std::string e = finished->error(); !e.empty()) return absl::InternalError(e);
  if (tokens) *tokens += finished->tokens();
  return finished->written();
}

// The re-plan from the load the set left, and its switch on every rank; the plan's figures into
// `result`.
absl::StatusOr<EngineCalibrationResult> Replan(Engine& engine, std::chrono::seconds timeout,
                                               EngineCalibrationResult result) {
  const uint64_t before = engine.Metrics().replans;
  engine.RequestExpertReplan();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MetricsSnapshot m = engine.Metrics();
  for (; m.replans == before; m = engine.Metrics()) {
    if (engine.failed()) return absl::UnavailableError("the rank group broke while switching to the planned placement");
    if (std::chrono::steady_clock::now() > deadline)
      return absl::DeadlineExceededError(
          absl::StrCat("the planned placement was not switched to in ", timeout.count(), " s"));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  result.expected_device_max_over_mean = m.replan_events.back().device_max_over_mean_after;
  result.before_device_max_over_mean = m.replan_events.back().device_max_over_mean_before;
  return result;
}

}  // namespace

absl::StatusOr<EngineCalibrationResult> PlanPlacementThroughEngine(Engine& engine, const EngineCalibration& c) {
  if (engine.Metrics().num_devices == 0)
    return absl::FailedPreconditionError("planning a placement needs expert parallelism (devices to place on)");
  const int64_t vocab = engine.model_config().vocab_size;
  if (c.max_tokens < 0 || c.max_tokens >= engine.max_model_len())
    return absl::InvalidArgumentError(absl::StrCat("tokens to write after each calibration prompt must be within [0, ",
                                                   engine.max_model_len(), ") (the context), got ", c.max_tokens));
  EngineCalibrationResult result;
  std::vector<std::vector<int32_t>> prompts = c.prompts;
  if (prompts.empty()) {
    if (c.samples < 1 || c.sample_tokens < 2)
      return absl::InvalidArgumentError(
          absl::StrCat("cannot sample ", c.samples, " calibration sequences of ", c.sample_tokens, " tokens"));
    std::mt19937_64 rng(c.seed);
    std::vector<Request> samples;
    for (int32_t i = 0; i < c.samples; ++i) {
      Request r;
      r.prompt_ids = {SampleFirstToken(rng, vocab)};
      r.params = CalibrationSampling();
      r.params.seed = c.seed + static_cast<uint64_t>(i);
      r.params.ignore_eos = true;
      r.params.max_tokens = std::min(c.sample_tokens, engine.max_model_len()) - 1;
      prompts.push_back(r.prompt_ids);
      samples.push_back(std::move(r));
    }
    result.sequences = c.samples;
    auto written = RunAll(engine, std::move(samples), c.timeout, &result.tokens);
    if (!written.ok()) return written.status();
    if (c.max_tokens == 0) return Replan(engine, c.timeout, result);  // the samples as written
    // The samples become the prompts served below; their own rows are not counted.
    for (size_t i = 0; i < prompts.size(); ++i)
      prompts[i].insert(prompts[i].end(), (*written)[i].begin(), (*written)[i].end());
    engine.ForgetExpertLoad();
  }
  std::vector<Request> requests;
  for (const std::vector<int32_t>& p : prompts) {
    Request r;
    // The context holds the prompt and its new tokens: a longer sequence is cut to fit.
    const int32_t written = std::max(c.max_tokens, 1);
    r.prompt_ids.assign(
        p.begin(), p.begin() + std::min<int64_t>(static_cast<int64_t>(p.size()), engine.max_model_len() - written));
    r.params.temperature = 0.f;
    r.params.max_tokens = written;
    r.params.ignore_eos = true;
    // Each in a prefix-cache scope of its own: every prompt token is computed and counted, as
    // MeasureServedExpertLoads counts them (no prefix of another prompt, nor a sample's own blocks
    // cached as it was written, is reused).
    r.cache_salt = CacheSaltHash(absl::StrCat("placement-calibration-", requests.size()));
    // Without written tokens, every prompt position goes through every layer and is counted:
    // asking for the prompt's logprobs computes them all (the last layer's FFN otherwise runs
    // only over rows whose logits are read, and the prefix cache is bypassed).
    if (c.max_tokens == 0) r.params.prompt_logprobs = 0;
    requests.push_back(std::move(r));
  }
  // The samples' sequences and tokens were counted as they were written.
  if (!c.prompts.empty()) result.sequences = static_cast<int64_t>(requests.size());
  if (auto st = RunAll(engine, std::move(requests), c.timeout, c.prompts.empty() ? nullptr : &result.tokens); !st.ok())
    return st.status();
  return Replan(engine, c.timeout, result);
}

}  // namespace ls
