// OpenAI-compatible request parsing and response formatting for /v1/completions and
// /v1/chat/completions: JSON in, engine structs out (and back). Every validation error names the
// field. Which fields are read, ignored or refused is the table in request_fields.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_output_parser.h"
#include "engine/request.h"
#include "nlohmann/json.hpp"
#include "server/api_context.h"
#include "server/chat_request.h"
#include "server/request_fields.h"

namespace ls::server {

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::vector<std::vector<int32_t>> prompts;  // completions: one or more (a batch); chat: one
  std::vector<std::string> prompt_texts;      // with echo: each prompt as text
  SamplingParams params;                      // as the engine gets them (max_tokens >= 1)
  int32_t n = 1;                              // choices per prompt; choice p·n + i is prompt p's i-th
  int32_t priority = 0;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool continuous_usage = false;  // with include_usage, vLLM's continuous_usage_stats: usage in every chunk
  bool chat_logprobs = false;     // chat: logprobs: true
  bool echo = false;              // completions: each choice's text starts with its prompt
  std::optional<int32_t> prompt_logprobs;  // vLLM's prompt_logprobs: alternatives per prompt token
  uint64_t cache_salt = 0;                 // Request::cache_salt
  bool generate = true;           // false: echo with max_tokens 0 (the engine's one token is dropped)
  bool tokens_as_ids = false;     // logprob tokens as "token_id:<id>"
  std::shared_ptr<const ChatSession> chat;  // chat: the rendered request its choices' parsers come from
  int32_t num_choices() const { return static_cast<int32_t>(prompts.size()) * n; }
};

constexpr int32_t kMaxPrompts = 256;  // prompts in one completions batch

// Parses and validates a request body; tokenizes the prompt or renders and tokenizes the chat;
// fills what the request leaves unset from the model's generation defaults. On error returns
// nullopt and fills *error.
std::optional<ParsedRequest> ParseRequest(Endpoint endpoint, const std::string& body, const ApiContext& ctx,
                                          ApiError* error);

// JSON as sent to a client: invalid UTF-8 in a string (a client's own bytes, echoed in an error
// that names them) is sent as U+FFFD rather than throwing.
template <typename Json>
std::string WireJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Response bodies and stream chunks.
nlohmann::json ErrorBody(const ApiError& e);
// A choice, or a streamed delta of one. With echo, the first delta of a choice (and a whole
// choice) carries its prompt: `echo_ids` and, with logprobs, `echo_logprobs` (one per prompt token
// after the first); its text is then already in `text`.
// For chat, `text` is the content, and reasoning and tool calls come apart.
struct Choice {
  std::vector<int32_t> token_ids;
  std::string text;
  std::string reasoning;
  std::vector<chat::ToolCallDelta> tool_calls;
  bool tool_calls_made = false;  // chat: the choice called tools (its finish_reason is "tool_calls")
  std::vector<TokenLogprob> logprobs;
  // A whole reply (AppendDelta): the message's tokens, which a Response gives with its message —
  // those of every delta before the first call that adds no reasoning and no call.
  std::vector<TokenLogprob> text_logprobs;
  FinishReason finish = FinishReason::kNone;
  std::vector<int32_t> echo_ids;
  std::vector<TokenLogprob> echo_logprobs;
  // With prompt_logprobs, the first delta of a choice (and a whole choice): its prompt's ids and
  // their logprobs (one per token after the first).
  std::vector<int32_t> prompt_ids;
  std::vector<TokenLogprob> prompt_logprobs;
  int64_t text_offset = 0;  // characters of the choice's text before this one (streaming)
};
// An engine output of choice `index` as a delta. With echo, the choice's first delta starts with
// its prompt (text, ids and prompt logprobs); without generation the engine's token is dropped and
// the choice finishes with "length".
Choice OutputToDelta(const ParsedRequest& r, int32_t index, RequestOutput& o, bool first);
// Adds a choice's next delta to the choice so far (a whole reply, as a non-streamed answer gives it).
void AppendDelta(Choice* c, Choice delta);
// Characters (code points) of UTF-8 text, as clients count text offsets.
int64_t TextChars(const std::string& s);
struct Usage {
  int32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};
// Tokens with their logprobs and alternatives as chat's logprobs.content and a Response's
// output_text.logprobs list them: token, logprob, bytes, top_logprobs.
nlohmann::json LogprobContentJson(const ParsedRequest& r, const std::vector<TokenLogprob>& lps, const ApiContext& ctx);
nlohmann::json CompletionBody(const ParsedRequest& r, const std::string& id, int64_t created, const std::string& model,
                              const std::vector<Choice>& choices, const Usage& usage, const ApiContext& ctx);
// The streamed chunks of a delta of choice `index`; `first` adds the assistant role (chat). A chat
// delta's tool calls go out as OpenAI streams them: a chunk with a call's id, type and name
// (arguments ""), then one with its arguments. None when the delta carries nothing.
std::vector<nlohmann::json> StreamChunks(const ParsedRequest& r, const std::string& id, int64_t created,
                                         const std::string& model, int32_t index, const Choice& delta, bool first,
                                         const ApiContext& ctx);
// A streamed chunk's usage with continuous_usage_stats: choice `index`'s prompt and its completion
// tokens so far (`completion_tokens`, as its latest output counts them).
nlohmann::json ChunkUsage(const ParsedRequest& r, int32_t index, int32_t completion_tokens);
nlohmann::json UsageChunk(const ParsedRequest& r, const std::string& id, int64_t created, const std::string& model,
                          const Usage& usage);
// OpenAI finish_reason string: "stop", "length" ("tool_calls" for a choice that called tools), or
// null while running ("abort"/"error" otherwise).
nlohmann::json FinishReasonJson(FinishReason f, bool tool_calls_made = false);

}  // namespace ls::server
