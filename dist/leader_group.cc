// LeaderGroup: the leader's round trips — plan out, own share, replies in.
#include "dist/leader_group.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ls::dist {

using Clock = std::chrono::steady_clock;

namespace {

// The leader's share of a round trip without a step.
absl::Status NothingHere() { return absl::OkStatus(); }

}  // namespace

LeaderGroup::LeaderGroup(Model* model, Communicator* comm, RankTimeouts timeouts, int32_t tensor_parallel)
    : model_(model),
      comm_(comm),
      timeouts_(timeouts),
      tensor_parallel_(tensor_parallel),
      built_epoch_(comm->size(), -1),
      built_memory_(comm->size()) {
  comm_->set_timeout(timeouts_.step);
}

absl::Status LeaderGroup::Broken(const std::string& what) const {
  return absl::UnavailableError(absl::StrCat("rank group of ", comm_->size(), " ranks: ", what));
}

absl::Status LeaderGroup::RoundTrip(StepMessage m, const std::vector<StepBatch>* batches,
                                    const std::function<absl::Status()>& local, std::vector<WorkerReply>* replies) {
  if (stopped_) return Broken("it has been stopped");
  if (!comm_->ok()) return Broken(comm_->error());
  if (prepare_) m.prepare = std::move(prepare_);
  prepare_.reset();
  m.switch_epoch = std::exchange(switch_epoch_, -1);
  // Each rank gets its own plan: its batch only (its tensor-parallel group's).
  std::vector<std::string> out(comm_->size());
  for (int32_t r = 1; r < comm_->size(); ++r) {
    if (batches) m.batch = (*batches)[r / tensor_parallel_];
    m.want_logits = r % tensor_parallel_ == 0;
    out[r] = Encode(m);
  }
  std::string own;
  if (!comm_->ScatterBytes(out, &own)) return Broken(comm_->error());
  // This rank's share; a failure here leaves the others waiting in the step's exchanges, so it
  // breaks the group as well.
  if (absl::Status st = local(); !st.ok()) {
    comm_->Fail(absl::StrCat("rank 0: its share of the step failed: ", st.message()));
    return Broken(comm_->error());
  }
  std::vector<std::string> all;
  if (!comm_->GatherBytes(Encode(WorkerReply{}), &all) || !comm_->ok()) return Broken(comm_->error());
  replies->assign(all.size(), WorkerReply{});
  for (int32_t r = 1; r < comm_->size(); ++r) {
    auto reply = DecodeWorkerReply(all[r]);
    if (!reply.ok()) return Broken(absl::StrCat("rank ", r, ": ", reply.status().message()));
    if (!reply->error.empty()) return Broken(absl::StrCat("rank ", r, " failed: ", reply->error));
    built_epoch_[r] = reply->built_epoch;
    built_memory_[r] = reply->built_memory;
    model_->AddExpertCounts(reply->expert_tokens, reply->device_rows);
    (*replies)[r] = std::move(*reply);
  }
  return absl::OkStatus();
}

absl::Status LeaderGroup::Start(const RankCacheSpec& cache, const LayerPlacements& placements) {
  StepMessage m;
  m.kind = StepKind::kStart;
  m.cache = cache;
  if (!placements.empty()) m.prepare = PlacementUpdate{0, placements};
  built_epoch_[0] = placements.empty() ? -1 : 0;
  // The workers may still be loading their model: a longer deadline for this one round trip.
  comm_->set_timeout(timeouts_.start);
  std::vector<WorkerReply> replies;
  const absl::Status st = RoundTrip(std::move(m), nullptr, NothingHere, &replies);
  comm_->set_timeout(timeouts_.step);
  if (!st.ok()) return st;
  nlohmann::json workers = nlohmann::json::object();
  for (int32_t r = 1; r < comm_->size(); ++r)
    workers[std::to_string(r)] = {{"pid", replies[r].pid}, {"host", replies[r].host}};
  workers_json_ = workers.dump();
  return absl::OkStatus();
}

absl::Status LeaderGroup::Step(const std::vector<StepBatch>& batches, KvCache& cache,
                               std::vector<std::vector<float>>* logits, std::vector<std::vector<float>>* hidden) {
  const auto t0 = Clock::now();
  StepMessage m;
  m.kind = StepKind::kStep;
  m.want_hidden = hidden != nullptr;
  logits->resize(size());
  if (hidden) hidden->resize(size());
  std::vector<WorkerReply> replies;
  comm_->TakeExchangeSeconds();
  auto own = [&] {
    model_->CaptureHidden(hidden ? &(*hidden)[0] : nullptr);
    const absl::Status s = model_->Forward(batches[0], cache, &(*logits)[0]);
    model_->CaptureHidden(nullptr);
    return s;
  };
  absl::Status st = RoundTrip(std::move(m), &batches, own, &replies);
  if (!st.ok()) return st;
  const int64_t V = model_->config().vocab_size, d = model_->config().hidden_size;
  StepTiming timing;
  timing.exchange_seconds = comm_->TakeExchangeSeconds();
  for (int32_t r = 1; r < comm_->size(); ++r) {
    timing.worker_exchange_max = std::max(timing.worker_exchange_max, replies[r].exchange_seconds);
    if (r % tensor_parallel_ != 0) continue;  // a tensor-parallel group's results come from its first process
    const int32_t g = r / tensor_parallel_;
    if (static_cast<int64_t>(replies[r].logits.size()) != batches[g].num_logit_floats(V))
      return Broken(absl::StrCat("rank ", r, " returned ", replies[r].logits.size(), " logits for ",
                                 batches[g].num_logit_rows(), " rows (", batches[g].num_logit_floats(V),
                                 " values with vocabulary ", V, ")"));
    (*logits)[g] = std::move(replies[r].logits);
    if (hidden) {
      if (static_cast<int64_t>(replies[r].hidden.size()) != static_cast<int64_t>(batches[g].tokens.size()) * d)
        return Broken(absl::StrCat("rank ", r, " returned ", replies[r].hidden.size(), " hidden values for ",
                                   batches[g].tokens.size(), " tokens of ", d));
      (*hidden)[g] = std::move(replies[r].hidden);
    }
  }
  if (record_) {
    for (const StepBatch& b : batches) timing.tokens += static_cast<int64_t>(b.tokens.size());
    timing.step_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    timings_.push_back(timing);
  }
  return absl::OkStatus();
}

absl::Status LeaderGroup::Idle() {
  StepMessage m;
  m.kind = StepKind::kIdle;
  std::vector<WorkerReply> replies;
  return RoundTrip(std::move(m), nullptr, NothingHere, &replies);
}

void LeaderGroup::PreparePlacement(int64_t epoch, const LayerPlacements& placements) {
  prepare_ = PlacementUpdate{epoch, placements};
  built_epoch_[0] = epoch;  // the leader built its share before handing it out
}

bool LeaderGroup::PlacementBuilt(int64_t epoch) const {
  for (int64_t e : built_epoch_)
    if (e < epoch) return false;
  return true;
}

void LeaderGroup::SwitchPlacement(int64_t epoch) { switch_epoch_ = epoch; }

void LeaderGroup::Stop() {
  if (stopped_ || !comm_->ok()) return;
  StepMessage m;
  m.kind = StepKind::kStop;
  std::vector<WorkerReply> replies;
  (void)RoundTrip(std::move(m), nullptr, NothingHere, &replies);  // the workers' last reply
  stopped_ = true;
}

}  // namespace ls::dist
