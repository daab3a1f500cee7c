// LeaderGroup: the RankGroup that rank 0 (the leader) drives over MPI. For every step it sends all
// ranks the step's plan (a StepMessage: each rank's batch and any placement change), runs its own
// batch on its model, then gathers the workers' replies: their logits rows, and the expert counts
// they recorded, which it adds to its own model's so that the balancer plans from the whole
// group's load. When the engine is idle it sends heartbeats. A failed collective (a rank died or
// stopped answering within the deadline) or a worker's failure is Unavailable: the group is broken
// for good. Under tensor parallelism the engine's ranks are the tensor-parallel groups of
// consecutive processes: every process of group g gets batch g, and the group's first process
// returns its logits. Used from the engine's loop thread (Start and Stop from the thread that owns the
// engine, never concurrently with it).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "dist/rank_timeouts.h"
#include "dist/step_message.h"
#include "engine/rank_group.h"
#include "models/model.h"

namespace ls::dist {

// One step as the leader saw it (for measurement).
struct StepTiming {
  int64_t tokens = 0;              // tokens of the step over all ranks
  double step_seconds = 0;         // plan out, own forward, replies in
  double exchange_seconds = 0;     // the leader's time in the MoE exchanges
  double worker_exchange_max = 0;  // the longest any worker spent in them
};

class LeaderGroup final : public RankGroup {
 public:
  // `model` is the leader's (joined to `comm` already); both outlive the group. `tensor_parallel`
  // processes make one of the engine's ranks (it divides the communicator's size).
  LeaderGroup(Model* model, Communicator* comm, RankTimeouts timeouts, int32_t tensor_parallel = 1);

  int32_t size() const override { return comm_->size() / tensor_parallel_; }
  int32_t num_processes() const override { return comm_->size(); }
  absl::Status Start(const RankCacheSpec& cache, const LayerPlacements& placements) override;
  absl::Status Step(const std::vector<StepBatch>& batches, KvCache& cache, std::vector<std::vector<float>>* logits,
                    std::vector<std::vector<float>>* hidden) override;
  std::chrono::milliseconds idle_interval() const override { return timeouts_.idle; }
  absl::Status Idle() override;
  void PreparePlacement(int64_t epoch, const LayerPlacements& placements) override;
  bool PlacementBuilt(int64_t epoch) const override;
  void SwitchPlacement(int64_t epoch) override;
  std::vector<RankExpertMemory> BuiltMemory() const override { return built_memory_; }
  void Stop() override;

  // The workers as they reported at start: "rank": {pid, host}, as a JSON object's text.
  const std::string& workers_json() const { return workers_json_; }
  // Measurement: the steps since the last call, and whether to record them at all.
  void RecordTimings(bool on) { record_ = on; }
  std::vector<StepTiming> TakeTimings() { return std::exchange(timings_, {}); }

 private:
  // Sends `m` (with any placement change waiting) to every rank — with rank r's batch from
  // `batches` when given — runs this rank's share (`local`) and gathers the workers' replies into
  // (*replies)[1..]. Unavailable when the group is broken.
  absl::Status RoundTrip(StepMessage m, const std::vector<StepBatch>* batches,
                         const std::function<absl::Status()>& local, std::vector<WorkerReply>* replies);
  absl::Status Broken(const std::string& what) const;

  Model* model_;
  Communicator* comm_;
  RankTimeouts timeouts_;
  int32_t tensor_parallel_;
  std::optional<PlacementUpdate> prepare_;  // goes out with the next message
  int64_t switch_epoch_ = -1;               // likewise
  std::vector<int64_t> built_epoch_;        // [processes] each one's newest built placement
  std::vector<RankExpertMemory> built_memory_;
  std::string workers_json_ = "{}";
  bool record_ = false;
  std::vector<StepTiming> timings_;
  bool stopped_ = false;
};

}  // namespace ls::dist
