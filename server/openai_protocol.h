// OpenAI-compatible request parsing and response formatting for /v1/completions and
// /v1/chat/completions: JSON in, engine structs out (and back). Every validation error names the
// field. The vLLM extensions users send are accepted too (top_k, min_p, repetition_penalty,
// stop_token_ids, ignore_eos, priority, min_tokens, skip_special_tokens).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "nlohmann/json.hpp"
#include "server/api_context.h"

namespace ls::server {

// A client error: HTTP status, message, and the offending field (if one).
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string param;
  std::string type = "invalid_request_error";
};

enum class Endpoint { kCompletions, kChat };

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
  int32_t n = 1;
  int32_t priority = 0;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool chat_logprobs = false;     // chat: logprobs: true
};

constexpr int32_t kMaxChoices = 8;

// Parses and validates a request body; tokenizes the prompt or renders and tokenizes the chat.
// On error returns nullopt and fills *error.
std::optional<ParsedRequest> ParseRequest(Endpoint endpoint, const std::string& body, const ApiContext& ctx,
                                          ApiError* error);

// Response bodies and stream chunks.
nlohmann::json ErrorBody(const ApiError& e);
struct Choice {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  FinishReason finish = FinishReason::kNone;
};
struct Usage {
  int32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};
nlohmann::json CompletionBody(const ParsedRequest& r, const std::string& id, int64_t created, const std::string& model,
                              const std::vector<Choice>& choices, const Usage& usage, const ApiContext& ctx);
// One streamed chunk for choice `index`; `first` adds the assistant role (chat).
nlohmann::json StreamChunk(const ParsedRequest& r, const std::string& id, int64_t created, const std::string& model,
                           int32_t index, const Choice& delta, bool first, const ApiContext& ctx);
nlohmann::json UsageChunk(const ParsedRequest& r, const std::string& id, int64_t created, const std::string& model,
                          const Usage& usage);
// OpenAI finish_reason string: "stop", "length", or null while running ("abort"/"error" otherwise).
nlohmann::json FinishReasonJson(FinishReason f);

}  // namespace ls::server
