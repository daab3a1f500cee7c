// Prometheus text exposition of the engine's metrics and the front ends' request counters.
#pragma once

#include <string>

#include "server/api_context.h"

namespace ls::server {

std::string RenderPrometheus(const ApiContext& ctx);

// Per MoE layer: max tokens per expert ÷ mean (1.0 = perfectly balanced; 0 when no tokens yet).
std::vector<std::pair<int32_t, double>> ExpertLoadMaxOverMean(const MetricsSnapshot& m);

}  // namespace ls::server
