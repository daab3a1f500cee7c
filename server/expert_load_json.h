// ExpertLoadJson: the body of GET /v1/expert_load — per MoE layer the tokens per expert over the
// load window, the placement (each device's slots), the rows per device and their balance, plus the
// window's extent and the recent re-plan switches. Pure: reads two snapshots, writes a string.
#pragma once

#include <string>

#include "engine/expert_balancer.h"
#include "engine/metrics.h"

namespace ls::server {

struct ExpertLoadJsonOptions {
  double now_unix_seconds = 0;  // the answer's "time"
  std::string model;            // the served model's name ("model")
  bool totals = false;          // also each layer's tokens per expert since start ("tokens_total")
};

// JSON object (see README, "Expert load"): {"object": "expert_load", "model", "time", "steps", "num_layers",
// "num_experts", "num_devices", "slots_per_device", "window": {"steps", "capacity", "first_step_time",
// "last_step_time"}, "replans", "replan_seconds_total", "last_replan_seconds",
// "longest_switch_step_seconds", "replan_events": [{"time", "step", "plan_seconds",
// "device_max_over_mean_before", "device_max_over_mean_after", "chunks", "max_chunk_seconds"}],
// "migration_chunks": [{"time", "step", "slots", "bytes", "seconds"}], "layers": [{"layer", "tokens",
// "max_over_mean", "total_max_over_mean", ["tokens_total"], and with devices "device_rows",
// "device_max_over_mean", "slot_expert": [[expert per slot] per device]}]}. Dense layers are left out.
std::string ExpertLoadJson(const MetricsSnapshot& m, const ExpertLoadWindowSnapshot& w,
                           const ExpertLoadJsonOptions& options);

}  // namespace ls::server
