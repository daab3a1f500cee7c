// The vLLM-compatible tokenizer endpoints of the HTTP API: POST /tokenize (a completion `prompt`,
// or chat `messages` rendered as /v1/chat/completions renders them, with add_special_tokens,
// add_generation_prompt, continue_final_message, tools, chat_template_kwargs, return_token_strs)
// answers {count, max_model_len, tokens, token_strs}; POST /detokenize ({tokens}) answers
// {prompt}. Unknown fields are refused, as on the generation endpoints.
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "server/api_context.h"
#include "server/api_error.h"

namespace ls::server {

struct TokenizeReply {
  int http_status = 200;
  nlohmann::json body;  // the answer, or the JSON error
};

TokenizeReply Tokenize(const std::string& body, const ApiContext& ctx);
TokenizeReply Detokenize(const std::string& body, const ApiContext& ctx);

}  // namespace ls::server
