// XtmlMessage: a chat request's messages read into what Kimi K3's XTML renderer writes — roles,
// text segments, reasoning, tool calls with their arguments split per key, and each tool result's
// tool name and index, matched to the assistant call it answers. Pure functions; no state.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/xtml_syntax.h"
#include "nlohmann/json.hpp"

namespace ls::chat::xtml {

struct XtmlToolCall {
  std::string id;    // the request's tool_calls[i].id (may be empty)
  std::string name;  // function.name, never empty
  ToolArguments arguments;
};

struct XtmlMessage {
  std::string role;  // system, user, assistant or tool (developer is read as system)
  std::string name;  // the `name` attribute; empty for none
  // Text parts, each encoded on its own as K3's reference encoder does (a string content is one).
  std::vector<std::string> parts;
  std::string reasoning;            // assistant: reasoning_content (or reasoning)
  std::vector<XtmlToolCall> calls;  // assistant: tool_calls
  std::string tool_call_id;         // tool
  std::string tool;                 // tool: the name of the tool that answered
  int tool_index = 0;               // tool: the 1-based index of the call it answers
  size_t source = 0;                // position in the request's messages
};

// Reads the OpenAI-style `messages` array. Errors are InvalidArgument naming the message and
// field (`messages[2].content[1]: content part type 'image_url' is not supported (text only)`).
//
// Tool results: each run of consecutive `tool` messages is matched to the calls of the last
// assistant message before it. When every tool_call_id of the run names one of those calls, the
// run is put in the calls' order and each result takes its call's name and 1-based position (as
// K3's reference encoder normalises it). Otherwise the run keeps its order and results are
// numbered 1, 2, ... since that assistant message, each named by its own `name`, else by the call
// its tool_call_id names, else by the call at its number; a result with no name found is an error.
absl::StatusOr<std::vector<XtmlMessage>> ReadXtmlMessages(const nlohmann::ordered_json& messages);

// The text parts of one content value (string, null or a list of text parts); `where` prefixes
// errors.
absl::StatusOr<std::vector<std::string>> ReadTextParts(const nlohmann::ordered_json& content, const std::string& where);

}  // namespace ls::chat::xtml
