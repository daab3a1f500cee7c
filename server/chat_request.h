// ChatRequest: a chat request as the model's ChatFormat takes it, read from OpenAI's JSON (the
// HTTP API; gRPC builds the same JSON from its messages). Messages are normalised as vLLM does:
// any role; text parts of content joined with newlines, or kept as parts for templates that loop
// over them; parts that are not text refused, naming their type (this server serves text only);
// assistant tool_calls kept with their JSON-string arguments parsed into objects; tools,
// tool_choice, template variables and the rest checked against what the format can do. Errors
// name the request field.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "chat/chat_format.h"
#include "nlohmann/json.hpp"
#include "server/api_context.h"
#include "server/api_error.h"

namespace ls::server {

// The chat fields of a request body, as its field table read them (pointers into the body).
struct ChatFields {
  const nlohmann::ordered_json* messages = nullptr;
  const nlohmann::ordered_json* tools = nullptr;
  const nlohmann::ordered_json* tool_choice = nullptr;
  const nlohmann::ordered_json* chat_template_kwargs = nullptr;
  const nlohmann::ordered_json* documents = nullptr;
  const nlohmann::ordered_json* reasoning_effort = nullptr;  // a string: the template variable of that name
  std::optional<bool> add_generation_prompt;  // default: true, or false when continuing the final message
  bool continue_final_message = false;
  bool include_reasoning = true;
  bool parallel_tool_calls = true;
  bool add_special_tokens = false;
  // Only the prompt is wanted (/tokenize): tools may be sent though no parser reads calls.
  bool prompt_only = false;
};

struct ChatRequest {
  chat::ChatRequestInputs inputs;
  chat::RenderOptions render;
  bool include_reasoning = true;    // reasoning_content is returned (vLLM's include_reasoning)
  bool parallel_tool_calls = true;  // false: only the first call is returned
};

// A rendered chat request: what its choices' parsers are made from.
struct ChatSession {
  const chat::ChatFormat* format = nullptr;
  ChatRequest request;
  chat::ChatPrompt prompt;
  std::unique_ptr<chat::ChatOutputParser> NewParser() const {
    return format->NewParser(request.inputs, request.render, prompt);
  }
};

// Reads and checks the chat fields against the served chat format.
bool ReadChatRequest(const ChatFields& f, const ApiContext& ctx, ChatRequest* out, ApiError* err);
// Renders a read request into a session (prompt ids, prefill). Errors name "messages".
std::shared_ptr<const ChatSession> RenderChat(const ApiContext& ctx, ChatRequest request, ApiError* err);

}  // namespace ls::server
