// Prometheus text exposition of the engine's metrics, the front ends' request counters and, where
// the HTTP server has one, its store of Responses API responses.
#pragma once

#include <string>

#include "server/api_context.h"
#include "server/response_store.h"

namespace ls::server {

std::string RenderPrometheus(const ApiContext& ctx, const ResponseStore* responses = nullptr);

// Per MoE layer: max tokens per expert ÷ mean (1.0 = perfectly balanced; 0 when no tokens yet).
std::vector<std::pair<int32_t, double>> ExpertLoadMaxOverMean(const MetricsSnapshot& m);

}  // namespace ls::server
