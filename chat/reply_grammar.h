// ReplyGrammar: the grammar a chat reply follows when the request constrains it: a reasoning
// section left free, then the content constraint (response_format), the tool calls that
// tool_choice asks for in the family's syntax with each tool's arguments held to its JSON schema,
// or, with tool_choice "auto", free content that may go on into calls. Built per request shape by
// the chat format (chat_format.h) and compiled once by the server's grammar cache.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/chat_format.h"
#include "nlohmann/json.hpp"
#include "structured/grammar.h"
#include "structured/output_constraint.h"

namespace ls::chat {

struct ToolCallFormat;

// The bytes a marker is matched as: a special token's are behind structured::kSpecialTokenByte.
using MarkerSpelling = std::function<std::string(std::string_view marker)>;

// One function tool as the request declares it.
struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // its JSON schema ({} when absent: any object)
  bool strict = false;                // strict: the schema must compile; else any object stands in
};

struct ReplyGrammarSpec {
  enum class Reasoning { kNone, kMayOpen, kOpen };  // no think parser; the reply may open one; it starts inside one
  Reasoning reasoning = Reasoning::kNone;
  const ToolCallFormat* tools = nullptr;  // null: no calls
  std::vector<ToolSpec> functions;
  ToolChoice choice;
  bool parallel_tool_calls = true;
  structured::OutputConstraint content;  // the content's own constraint (none: free content)
  MarkerSpelling spell;
};

// The tools of a request's `tools` field (function tools; others are refused earlier).
std::vector<ToolSpec> ToolSpecs(const nlohmann::ordered_json& tools);
// A key naming the grammar of `spec` exactly.
std::string ReplyGrammarKey(const ReplyGrammarSpec& spec);
// Errors: InvalidArgument naming the tool or the unsupported keyword.
absl::StatusOr<structured::Grammar> BuildReplyGrammar(const ReplyGrammarSpec& spec);

// Helpers of the families' call grammars (ToolCallFormat::call_grammar).
// The symbols matching `text` as the vocabulary spells it.
std::vector<structured::Symbol> Marker(structured::GrammarBuilder& b, const MarkerSpelling& spell, std::string_view text);
// A JSON object matching the tool's parameters.
absl::StatusOr<structured::Symbol> ArgumentsRule(structured::GrammarBuilder& b, const ToolSpec& tool);

}  // namespace ls::chat
