// A calibration set run through a serving engine, for --expert_placement auto where the model
// cannot step on its own before serving (a rank group's model steps only with its ranks, which
// the engine drives): the set's expert load fills the engine's window, the engine plans a
// placement from it and switches to it, and the window starts afresh — all before the server
// reports ready. A single process plans before the engine instead (engine/calibration.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/calibration.h"
#include "engine/engine.h"

namespace ls {

struct EngineCalibration {
  // The calibration sequences, each served as a prompt the model continues with `max_tokens`
  // greedy tokens (cut to leave them room in the context), so that each layer counts the rows it
  // computes when serving (MeasureServedExpertLoads, engine/calibration.h); `max_tokens` 0: each
  // prompt alone, every token through every layer. Empty: the model samples `samples` sequences
  // of `sample_tokens` tokens itself, as SampleFromModel does, and they are served as the
  // prompts, the load of their sampling forgotten (Engine::ForgetExpertLoad); with `max_tokens`
  // 0 the load of their sampling plans.
  std::vector<std::vector<int32_t>> prompts;
  int32_t max_tokens = kCalibrationMaxTokens;
  int32_t samples = kCalibrationSamples, sample_tokens = kCalibrationSampleTokens;
  uint64_t seed = 1;
  std::chrono::seconds timeout{600};  // for the set, and again for the switch
};

struct EngineCalibrationResult {
  int64_t sequences = 0, tokens = 0;  // what ran: prompt and generated tokens together
  // The plan's expected device max/mean on the set's load (mean over the MoE layers), and the
  // placement's it replaced.
  double expected_device_max_over_mean = 0, before_device_max_over_mean = 0;
};

// Runs the set through `engine` (which needs expert parallelism), then the re-plan and its switch.
// Errors name the sequence or the step that failed.
absl::StatusOr<EngineCalibrationResult> PlanPlacementThroughEngine(Engine& engine, const EngineCalibration& c);

}  // namespace ls
