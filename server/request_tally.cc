// RequestTally: usage, latencies and failure of a generation request from its final outputs.
#include "server/request_tally.h"

#include <algorithm>

namespace ls::server {

RequestTally::RequestTally(const ParsedRequest& r, const std::string& id) : r_(r) {
  for (const auto& p : r.prompts) usage.prompt_tokens += static_cast<int32_t>(p.size());
  log.id = id;
  log.api = "http";
  log.endpoint = r.endpoint == Endpoint::kChat ? "chat" : "completions";
  log.prompt_tokens = usage.prompt_tokens;
}

std::optional<ApiError> RequestTally::FailureOf(const RequestOutput& o) {
  if (o.finish_reason == FinishReason::kError) return ApiError{500, o.error, "", "server_error"};
  if (o.finish_reason == FinishReason::kCancelled && !o.error.empty())
    return ApiError{503, o.error, "", "service_unavailable"};
  return std::nullopt;
}

void RequestTally::Finished(int32_t i, const RequestOutput& o) {
  ++finished_;
  if (r_.generate) usage.completion_tokens += o.completion_tokens;
  if (i % r_.n == 0) usage.cached_tokens += o.cached_prompt_tokens;
  log.queue_s = std::max(log.queue_s, o.queue_seconds);
  log.ttft_s = std::max(log.ttft_s, o.ttft_seconds);
  log.output_tokens = usage.completion_tokens;
  if (auto f = FailureOf(o)) failure = std::move(f);
}

}  // namespace ls::server
