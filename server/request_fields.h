// The one list of request fields /v1/completions and /v1/chat/completions accept, and how each
// is treated: honoured (read into a RequestDraft), ignored (it only tunes delivery), or refused
// with a 400 naming it unless it asks for nothing (e.g. "functions": []). A field in no row
// is refused as unknown. Making a refused field honoured is changing its row to a reader.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/generation_defaults.h"
#include "engine/sampling_params.h"
#include "nlohmann/json.hpp"
#include "server/api_error.h"
#include "server/chat_request.h"
#include "structured/output_constraint.h"

namespace ls::server {

enum class Endpoint { kCompletions, kChat };

constexpr int32_t kMaxChoices = 128;  // n (OpenAI's bound)

// A request's fields as read, before its prompt is tokenized. Pointers point into the body.
struct RequestDraft {
  SamplingParams params;                     // max_tokens is set below, once the endpoint's default is known
  SampledFields given;                       // the sampling fields sent (the rest take the model's defaults)
  std::optional<int64_t> max_tokens;         // as sent: max_tokens or max_completion_tokens
  const nlohmann::ordered_json* prompt = nullptr;  // completions
  ChatFields chat;                                 // chat: messages, tools, ...
  int32_t n = 1;
  int32_t priority = 0;
  bool stream = false;
  bool include_usage = false;                     // stream_options.include_usage
  bool continuous_usage = false;                  // stream_options.continuous_usage_stats (vLLM's)
  bool echo = false;                              // completions: the prompt precedes the completion
  std::optional<int32_t> logprobs;                // completions: top alternatives per token
  bool chat_logprobs = false;                     // chat: logprobs: true
  std::optional<int32_t> top_logprobs;            // chat
  std::optional<int32_t> prompt_logprobs;         // vLLM's: each prompt token's logprob and alternatives
  std::vector<std::string> bad_words;             // vLLM's: tokenized once the tokenizer is at hand
  uint64_t cache_salt = 0;                        // vLLM's: the prefix-cache scope (Request::cache_salt)
  std::optional<int32_t> truncate_prompt_tokens;  // keep only the prompt's last this many tokens
  bool tokens_as_ids = false;                     // return_tokens_as_token_ids
  std::optional<bool> add_special_tokens;         // default: true for completions, false for chat
  structured::OutputConstraint constraint;        // response_format, structured_outputs, guided_*
  std::string constraint_field;                   // which of them
};

// Reads every field of `body` (a JSON object) for `endpoint` into *draft. False, with *error
// naming the field, for an unknown field, a refused one that asks for something, or a bad value.
bool ReadRequestFields(Endpoint endpoint, const nlohmann::ordered_json& body, RequestDraft* draft, ApiError* error);

}  // namespace ls::server
