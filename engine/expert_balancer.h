// ExpertBalancer: the engine's expert-placement side (DESIGN.md §5) — the initial placement
// (uniform, or from a file), the sliding window of per-expert load, re-planning in the
// background and the switch to a new placement at a step boundary, and the placement and load
// JSON. Across a rank group the devices split over the ranks: a new placement goes to every rank,
// each builds its share in the background, and all switch at the same step once all have built
// it. The engine loop calls BeforeStep and AfterStep around every step; ExpertLoadJson may be
// called from any thread, everything else from the loop thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/expert_load_window.h"
#include "engine/metrics.h"
#include "engine/rank_group.h"
#include "models/model.h"

namespace ls {

struct ExpertBalancerConfig {
  int32_t num_devices = 0;           // 0: expert parallelism off (unless a placement file is given or
                                     // the group has several ranks: then one device per rank)
  int32_t expert_slots = 0;          // per device; 0 = just enough for every expert once
  std::string placement_json;        // a static placement; empty = planned from statistics
  int32_t replan_interval = 0;       // re-plan every this many steps in the background; 0 = never
  int32_t load_window = 256;         // steps of expert-load statistics the planner reads
};

class ExpertBalancer {
 public:
  // Installs the initial placement on the model (or none); errors name the setting. `group`
  // (which outlives the balancer) is the ranks the devices split over.
  static absl::StatusOr<std::unique_ptr<ExpertBalancer>> Create(Model* model, const ExpertBalancerConfig& config,
                                                                EngineMetrics* metrics, RankGroup* group);
  ~ExpertBalancer();  // waits for a plan in progress

  // Before a step: hands a placement the planner finished to the other ranks, and switches to it
  // once every rank has built it.
  void BeforeStep();
  // After a step: records its expert load; every replan_interval steps starts a plan.
  void AfterStep();
  // Forgets the load counted so far (the warm-up step's routing is not load).
  void ResetLoad();
  // Whether the step just run overlapped a plan or was the first on a new placement; clears the
  // latter.
  bool TakeSwitching();

  // Load over the window as JSON (per MoE layer, tokens per expert).
  std::string ExpertLoadJson() const;
  // The placement in use as JSON loadable as a placement file (empty without one).
  std::string PlacementJson() const;
  // The placement in use, per MoE layer (empty without one).
  LayerPlacements Placements() const;
  // Reads each rank's placed-expert memory into the metrics (after the group started).
  void UpdateRankMemory();

 private:
  ExpertBalancer(Model* model, const ExpertBalancerConfig& config, EngineMetrics* metrics, RankGroup* group);
  void InstallMetrics(const PlacedExperts& placed, double seconds);

  Model* model_;
  RankGroup* group_;
  ExpertBalancerConfig config_;
  EngineMetrics* metrics_;
  std::vector<int32_t> moe_layers_;
  ExpertLoadWindow window_;
  mutable std::mutex window_mu_;  // guards window_ for ExpertLoadJson
  std::vector<int64_t> last_counts_;
  std::thread planner_;
  std::atomic<bool> planning_{false};
  std::mutex pending_mu_;
  std::shared_ptr<const PlacedExperts> pending_;  // planned and built here, not yet handed out
  LayerPlacements pending_layers_;
  double pending_seconds_ = 0;
  // Handed to the other ranks, waiting until all have built it (then switched to).
  std::shared_ptr<const PlacedExperts> announced_;
  double announced_seconds_ = 0;
  int64_t epoch_ = 0;         // the placement's number: 0 the initial one, then one more per re-plan
  bool switch_step_ = false;  // the next step is the first on a new placement
  int32_t steps_since_replan_ = 0;
};

}  // namespace ls
