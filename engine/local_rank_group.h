// LocalRankGroup: the RankGroup of one process — every step runs on this process's model alone,
// a new expert placement is ready as soon as the engine has built it, and there is no one to
// send a heartbeat to. What the engine uses unless it leads a group of processes (dist/).
#pragma once

#include "engine/rank_group.h"
#include "models/model.h"

namespace ls {

class LocalRankGroup final : public RankGroup {
 public:
  explicit LocalRankGroup(Model* model) : model_(model) {}

  int32_t size() const override { return 1; }
  absl::Status Start(const RankCacheSpec&, const LayerPlacements&) override { return absl::OkStatus(); }
  absl::Status Step(const std::vector<StepBatch>& batches, KvCache& cache, std::vector<std::vector<float>>* logits,
                    std::vector<std::vector<float>>* hidden) override {
    logits->resize(1);
    if (!hidden) return model_->Forward(batches[0], cache, &(*logits)[0]);
    hidden->resize(1);
    model_->CaptureHidden(&(*hidden)[0]);
    const absl::Status st = model_->Forward(batches[0], cache, &(*logits)[0]);
    model_->CaptureHidden(nullptr);
    return st;
  }
  std::chrono::milliseconds idle_interval() const override { return std::chrono::hours(24); }
  absl::Status Idle() override { return absl::OkStatus(); }
  void PreparePlacement(int64_t, const LayerPlacements&) override {}
  bool PlacementBuilt(int64_t) const override { return true; }
  void SwitchPlacement(int64_t) override {}
  std::vector<RankExpertMemory> BuiltMemory() const override { return {RankExpertMemory{}}; }
  void Stop() override {}

 private:
  Model* model_;
};

}  // namespace ls
