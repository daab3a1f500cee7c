// ExpertBalancer: the engine's expert-placement side (DESIGN.md §5) — the initial placement
// (uniform, or from a file), the sliding window of per-expert load, re-planning in the
// background and the switch to a new placement at a step boundary, and the placement and load
// JSON. The engine loop calls BeforeStep and AfterStep around every step; ExpertLoadJson may be
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
#include "models/model.h"

namespace ls {

struct ExpertBalancerConfig {
  int32_t num_devices = 0;           // 0: expert parallelism off (unless a placement file is given)
  int32_t expert_slots = 0;          // per device; 0 = just enough for every expert once
  std::string placement_json;        // a static placement; empty = planned from statistics
  int32_t replan_interval = 0;       // re-plan every this many steps in the background; 0 = never
  int32_t load_window = 256;         // steps of expert-load statistics the planner reads
};

class ExpertBalancer {
 public:
  // Installs the initial placement on the model (or none); errors name the setting.
  static absl::StatusOr<std::unique_ptr<ExpertBalancer>> Create(Model* model, const ExpertBalancerConfig& config,
                                                                EngineMetrics* metrics);
  ~ExpertBalancer();  // waits for a plan in progress

  // Before a step: switches to a placement the planner finished.
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

 private:
  ExpertBalancer(Model* model, const ExpertBalancerConfig& config, EngineMetrics* metrics);
  void InstallMetrics(const PlacedExperts& placed, double seconds);

  Model* model_;
  ExpertBalancerConfig config_;
  EngineMetrics* metrics_;
  std::vector<int32_t> moe_layers_;
  ExpertLoadWindow window_;
  mutable std::mutex window_mu_;  // guards window_ for ExpertLoadJson
  std::vector<int64_t> last_counts_;
  std::thread planner_;
  std::atomic<bool> planning_{false};
  std::mutex pending_mu_;
  std::shared_ptr<const PlacedExperts> pending_;
  double pending_seconds_ = 0;
  bool switch_step_ = false;  // the next step is the first on a new placement
  int32_t steps_since_replan_ = 0;
};

}  // namespace ls
