// ToolCallFormat: one model family's way of writing tool calls in its output — the syntax its
// ToolCallParser reads, the marker strings a decoder may hide, and the text that opens a call, with
// which the server forces one (tool_choice "required" or a named function). The formats are
// constants (hermes_tool_parser, deepseek_v3_tool_parser, kimi_k2_tool_parser, glm45_tool_parser), found by the
// --tool_call_parser name; a model family names its own (Family::tool_call_format).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/reply_grammar.h"
#include "chat/tool_call_parser.h"
#include "structured/grammar.h"

namespace ls::chat {

struct ToolCallFormat {
  std::string name;  // the --tool_call_parser value
  ToolCallSyntax syntax;
  // The prompt text after which the model's next output is a call: to `function` (it then writes
  // the arguments), or to a function it names (`function` empty). `call_index` numbers the call in
  // the conversation, for formats whose call ids count calls (Kimi-K2).
  std::string (*forced_call_prefix)(const std::string& function, int call_index);
  // The grammar of one call to `tool` as the family writes it (from call_begin to call_end; a
  // section's markers are the reply grammar's), its arguments held to the tool's schema. It
  // agrees with forced_call_prefix, which the reply may start from.
  absl::StatusOr<std::vector<structured::Symbol>> (*call_grammar)(structured::GrammarBuilder& b,
                                                                  const MarkerSpelling& spell, const ToolSpec& tool);

  std::vector<std::string> markers() const;
  std::unique_ptr<ChatOutputParser> NewParser(ToolParserOptions options) const;
};

// "hermes" (also "qwen"), "deepseek_v3", "kimi_k2" or "glm45"; nullptr for another name.
const ToolCallFormat* FindToolCallFormat(std::string_view name);
std::vector<std::string> ToolCallFormatNames();

const ToolCallFormat& HermesToolCallFormat();
const ToolCallFormat& DeepSeekV3ToolCallFormat();
const ToolCallFormat& KimiK2ToolCallFormat();
const ToolCallFormat& Glm45ToolCallFormat();

}  // namespace ls::chat
