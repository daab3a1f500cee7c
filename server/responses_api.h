// The Responses API (POST /v1/responses), stateless: a request is read into the equivalent chat
// completion request (input items to messages, instructions to a system message, function tools,
// tool_choice, text.format to response_format, max_output_tokens), served by the chat pipeline,
// and its reply written back as a Response object: reasoning, message and function_call output
// items, or, streamed, as the Responses events (response.created, response.output_item.added,
// response.output_text.delta, response.function_call_arguments.delta, response.completed, ...).
// A response asked to be stored (store: true, the default) is kept in the server's ResponseStore
// with its conversation, which previous_response_id continues; a background one is answered at
// once (queued) and generated detached, the store following it to its end. Where vLLM's implementation and
// OpenAI's differ, vLLM's shapes are followed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/api_error.h"
#include "server/openai_protocol.h"
#include "server/response_store.h"

namespace ls::server {

struct ResponsesRequest {
  std::string chat_body;          // the chat completion request it stands for (JSON text)
  nlohmann::ordered_json echo;    // the settings the Response repeats (instructions, tools, text, ...)
  // The chat messages without the instructions: a previous response's conversation, then the input.
  nlohmann::ordered_json conversation;
  nlohmann::ordered_json input_items;  // the input as Responses items (a string: one user message)
  bool stream = false;
  bool store = false;       // keep the finished response in the store
  bool background = false;  // answer at once; the store has the response as it goes
  bool truncate = false;    // truncation "auto": the oldest turns go when the prompt does not fit
  bool logprobs = false;    // include: "message.output_text.logprobs" (top_logprobs alternatives each)
};

// Reads a /v1/responses body; nullopt with *error naming the field (as the chat fields' errors
// do). previous_response_id is looked up in `store`.
std::optional<ResponsesRequest> ReadResponsesRequest(const std::string& body, ResponseStore* store, ApiError* error);

// The chat request `req` stands for, parsed as ParseRequest parses it. With truncation "auto", a
// prompt that does not fit the context drops the conversation's oldest turns (from one user
// message to the next; the instructions stay) until it does, as OpenAI's API does.
std::optional<ParsedRequest> ParseResponsesRequest(const ResponsesRequest& req, const ApiContext& ctx, ApiError* error);

// The Response of a background request that has not finished ("queued", "in_progress") or that
// ended without its reply ("cancelled", "failed": `error` then says why), with the output so far.
nlohmann::ordered_json UnfinishedResponse(const ResponsesRequest& req, const std::string& id, int64_t created,
                                          const std::string& model, const char* status, const Choice& reply,
                                          const ApiError* error = nullptr);

// Whether a stored Response is still generating (status "queued" or "in_progress"): only a
// background response is ever stored so.
bool StillRunning(const nlohmann::ordered_json& response);

// What the store keeps of a finished response: its Response object, its conversation with the
// reply appended as the assistant's message (reasoning, text and function calls), and its input
// items, each with an id (the one it was sent with, else one made from the response's).
ResponseStore::Entry StoredResponse(const ResponsesRequest& req, const nlohmann::ordered_json& response,
                                    const Choice& reply);

// GET /v1/responses/{id}/input_items: a page of a stored response's input items (`items`, as
// stored) as the list object, by the query's `order` (desc, the default, or asc), `limit` (1-100,
// default 20) and `after` (an item id: the page starts after it); nullopt with *error naming a
// bad parameter.
std::optional<nlohmann::ordered_json> InputItemsPage(const std::string& items, std::string_view query, ApiError* error);

// A message's output_text.logprobs: the tokens that made its text, each with its logprob, bytes and
// top_logprobs alternatives, when the request included them; else empty.
nlohmann::ordered_json TextLogprobs(const ResponsesRequest& req, const ParsedRequest& r,
                                    const std::vector<TokenLogprob>& lps, const ApiContext& ctx);

// The Response object of a finished reply (its one choice, whole); `logprobs` are its message's
// (TextLogprobs of reply.text_logprobs).
nlohmann::ordered_json ResponseBody(const ResponsesRequest& req, const std::string& id, int64_t created,
                                    const std::string& model, const Choice& reply, const Usage& usage,
                                    const nlohmann::ordered_json& logprobs);

// The events of a streamed response, from the chat reply's deltas, as server-sent-event text. A text
// delta carries its tokens' logprobs when the request included them (TextLogprobs of `r`).
class ResponseEvents {
 public:
  ResponseEvents(const ResponsesRequest& req, const ParsedRequest& r, const ApiContext& ctx, std::string id,
                 int64_t created, std::string model);
  std::string Start();                   // response.created, response.in_progress
  std::string Delta(const Choice& delta);  // items opened and closed, text and argument deltas
  std::string Finish(const Usage& usage);  // the last item closed, then response.completed (or .incomplete)
  std::string Error(const ApiError& e);    // an `error` event (the response fails)
  // After Finish: the Response object it sent, and the whole reply.
  const nlohmann::ordered_json& final_response() const { return final_; }
  const Choice& reply() const { return reply_; }

 private:
  enum class Open { kNone, kReasoning, kMessage, kCall };
  std::string Event(const char* type, nlohmann::ordered_json body);
  void Close(std::string* out);  // ends the open item: its done events
  void OpenItem(Open kind, std::string* out, const chat::ToolCallDelta* call = nullptr);

  // The reply's message tokens from index `from` on, as output_text lists them (TextLogprobs).
  nlohmann::ordered_json MessageLogprobs(size_t from) const;

  const ResponsesRequest& req_;
  const ParsedRequest& r_;
  const ApiContext& ctx_;
  std::string id_, model_;
  int64_t created_;
  int64_t sequence_ = 0;
  Open open_ = Open::kNone;
  int32_t open_call_ = -1;          // the chat call index of the open function_call item
  std::string text_;                // the open item's text or arguments so far
  // In reply_.text_logprobs: the open message's first token, and the first not sent yet.
  size_t message_begin_ = 0, sent_ = 0;
  Choice reply_;  // everything so far (AppendDelta), for the final Response
  nlohmann::ordered_json items_ = nlohmann::ordered_json::array();  // the finished output items
  nlohmann::ordered_json item_;     // the open item
  nlohmann::ordered_json final_;    // the Response of response.completed / .incomplete
};

}  // namespace ls::server
