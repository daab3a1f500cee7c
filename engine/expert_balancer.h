// ExpertBalancer: the engine's expert-placement side (docs/serving.md) — the initial placement
// (uniform, planned from expected loads, or from a file), the sliding window of per-expert load,
// re-planning in the background (the new placement copied there too, or under a step budget on
// the loop between steps, a chunk of slots at a time) and the switch to it at a step boundary,
// and the placement and load JSON. Across a rank group the devices split over the ranks: a new
// placement goes to every rank, each builds its share in the background, and all switch at the
// same step once all have built it. The engine loop calls BeforeStep and AfterStep around every
// step, and RecordStepLoad once the step has run; ExpertLoadJson and WindowSnapshot may be called
// from any thread, everything else from the loop thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "engine/expert_load_window.h"
#include "engine/metrics.h"
#include "engine/rank_group.h"
#include "models/model.h"
#include "models/placed_experts.h"

namespace ls {

struct ExpertBalancerConfig {
  int32_t num_devices = 0;           // 0: expert parallelism off (unless a placement file is given or
                                     // the group has several ranks: then one device per rank)
  int32_t expert_slots = 0;          // per device; 0 = just enough for every expert once
  std::string placement_json;        // a static placement; empty = planned from statistics
  // Expected tokens per expert of each MoE layer (engine/calibration.h's MeasureExpertLoads):
  // without a placement file, the initial placement is planned from them instead of uniform.
  std::map<int32_t, std::vector<double>> initial_loads;
  int32_t replan_interval = 0;       // re-plan every this many steps in the background; 0 = never
  // > 0: a re-plan's new placement is copied on the engine loop between steps, a chunk of slots
  // before each step taking at most this long (at least one slot a step, so a single slot slower
  // than the budget still moves), and switched in once complete. 0: built whole in the
  // background. One process only (a rank group's ranks switch together from background builds).
  double replan_step_budget_ms = 0;
  int32_t load_window = 256;         // steps of expert-load statistics the planner reads
};

// The load window as plain data, copied out for readers on other threads (the HTTP front end).
struct ExpertLoadWindowSnapshot {
  int32_t steps = 0;     // steps the window holds now
  int32_t capacity = 0;  // steps it holds when full (ExpertBalancerConfig::load_window)
  double first_step_unix_seconds = 0, last_step_unix_seconds = 0;  // when its oldest and newest steps ended; 0 if empty
  int32_t num_experts = 0;
  std::vector<int32_t> moe_layers;  // ascending
  std::vector<int64_t> tokens;      // [moe_layers.size() * num_experts] tokens routed over the window
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
  // Once a step has run, before its tokens are delivered: adds its expert load to the window, so
  // that a client holding a reply already finds that reply's last step counted.
  void RecordStepLoad();
  // After a step: every replan_interval steps starts a plan from the window.
  void AfterStep();
  // Asks for a plan from the window whatever replan_interval says (also when it is 0): the loop
  // starts it at its next pass, busy or idle, and switches to it as to any re-plan, after which the
  // window starts afresh (what it held was the load the plan was made for). Any thread.
  void RequestReplan() { replan_requested_ = true; }
  // Asks the loop to forget the window and the counters at its next BeforeStep (Engine::
  // ForgetExpertLoad). Any thread.
  void RequestClearWindow() { clear_requested_ = true; }
  // How long the loop may wait, with nothing to run, before its next BeforeStep (`idle`: what it
  // waits otherwise): under a step budget, no wait while a placement is being copied (its chunks
  // go on back to back) and a few milliseconds while one is being planned; without a budget, a
  // few milliseconds while a plan asked for (RequestReplan) is pending; else `idle`.
  std::chrono::milliseconds IdleWait(std::chrono::milliseconds idle) const;
  // Forgets the load counted so far (the warm-up step's routing is not load).
  void ResetLoad();
  // Whether the step just run overlapped a plan or was the first on a new placement; clears the
  // latter.
  bool TakeSwitching();

  // Load over the window as JSON (per MoE layer, tokens per expert).
  std::string ExpertLoadJson() const;
  // Load over the window, per MoE layer, with the window's extent in steps and time.
  ExpertLoadWindowSnapshot WindowSnapshot() const;
  // The placement in use as JSON loadable as a placement file (empty without one).
  std::string PlacementJson() const;
  // The placement in use, per MoE layer (empty without one).
  LayerPlacements Placements() const;
  // Reads each rank's placed-expert memory into the metrics (after the group started).
  void UpdateRankMemory();

 private:
  ExpertBalancer(Model* model, const ExpertBalancerConfig& config, EngineMetrics* metrics, RankGroup* group);
  // Publishes the placement in use; `replan` is the switch that installed it (none at start-up).
  void InstallMetrics(const PlacedExperts& placed, const ReplanEvent* replan);
  // Under a step budget: starts copying a finished plan, copies the next chunk of slots within the
  // budget, and switches once every slot is copied.
  void MigrateChunk();
  // Plans from the window in the background (AfterStep's every replan_interval steps, or asked for).
  void StartPlan();
  // After a switch to a plan that was asked for: the window and the counters start afresh.
  void ClearWindow();

  Model* model_;
  RankGroup* group_;
  ExpertBalancerConfig config_;
  EngineMetrics* metrics_;
  std::vector<int32_t> moe_layers_;
  mutable Mutex window_mu_;  // the loop writes the window and its ring; the server reads them
  ExpertLoadWindow window_ ABSL_GUARDED_BY(window_mu_);
  // [load_window] ring beside window_: when each step ended.
  std::vector<double> step_end_unix_ ABSL_GUARDED_BY(window_mu_);
  int32_t next_step_slot_ ABSL_GUARDED_BY(window_mu_) = 0;  // the ring slot the next step writes
  std::vector<int64_t> last_counts_;
  std::thread planner_;
  std::atomic<bool> planning_{false};
  std::atomic<bool> replan_requested_{false};
  std::atomic<bool> clear_requested_{false};
  bool clear_window_on_switch_ = false;  // the plan in flight was asked for (RequestReplan)
  Mutex pending_mu_;  // the planner thread hands its result to the loop
  std::shared_ptr<const PlacedExperts> pending_ ABSL_GUARDED_BY(pending_mu_);  // planned and built, not yet handed out
  LayerPlacements pending_layers_ ABSL_GUARDED_BY(pending_mu_);
  ReplanEvent pending_event_ ABSL_GUARDED_BY(pending_mu_);  // its figures; time and step are set at the switch
  // Under a step budget: planned, its buffers allocated, not yet copied.
  std::unique_ptr<PlacedExpertsBuild> pending_build_ ABSL_GUARDED_BY(pending_mu_);
  std::unique_ptr<PlacedExpertsBuild> migration_;  // under a step budget: the placement being copied
  ReplanEvent migration_event_;                    // its figures so far
  // Handed to the other ranks, waiting until all have built it (then switched to).
  std::shared_ptr<const PlacedExperts> announced_;
  ReplanEvent announced_event_;
  int64_t epoch_ = 0;         // the placement's number: 0 the initial one, then one more per re-plan
  bool switch_step_ = false;  // the next step is the first on a new placement
  int32_t steps_since_replan_ = 0;
};

}  // namespace ls
