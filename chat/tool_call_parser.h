// ToolCallParser: the ChatOutputParser shared by the text tool-call formats (Hermes, DeepSeek-V3,
// Kimi-K2): content, then calls written between fixed markers, optionally grouped in a section.
// A format is a ToolCallSyntax: its markers and how one call's text reads as a name and JSON
// arguments. A call is held back until its end marker and checked whole, so that a malformed one
// (not the format, arguments that are not a JSON object, left open) can still go out as content,
// with a warning; a good one goes out whole, as one delta with its id, name and arguments (the
// server streams it as OpenAI does: id and name first, then the arguments). Whitespace between
// and around calls is dropped. One per choice.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "chat/chat_output_parser.h"
#include "chat/marker_scanner.h"

namespace ls::chat {

// One call as a format's text gives it.
struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text
  std::string id;         // when the format writes one (Kimi-K2's "functions.f:0"), else empty
};

struct ToolCallSyntax {
  std::string section_begin, section_end;  // empty when calls stand alone (Hermes)
  std::string call_begin, call_end;
  // The call between call_begin and call_end, or nullopt with *why set when it is malformed.
  std::function<std::optional<ParsedToolCall>(std::string_view body, std::string* why)> parse_call;
};

struct ToolParserOptions {
  MarkerTokens marker_tokens;                // marker tokens a decoder may have skipped
  std::function<std::string()> new_call_id;  // ids of calls whose text has none; default "chatcmpl-tool-<random>"
};

// The text of a JSON object for `arguments`, or nullopt: an object as is; a string holding an
// object's JSON; empty text or null as {}. Anything else is not arguments.
std::optional<std::string> ArgumentsJson(std::string_view text);
// A function name a call may carry: non-empty, no whitespace, no control characters.
bool IsCallName(std::string_view name);
// "chatcmpl-tool-" and 32 random hex digits, as vLLM names calls.
std::string RandomCallId();

class ToolCallParser final : public ChatOutputParser {
 public:
  ToolCallParser(ToolCallSyntax syntax, ToolParserOptions options);
  ChatDelta Feed(int32_t token_id, std::string_view text) override;
  ChatDelta Finish() override;
  const std::string& warning() const override { return warning_; }

 private:
  enum class State { kContent, kSection, kCall };
  void Process(bool final, ChatDelta* out);
  void EmitContent(std::string_view text, ChatDelta* out);
  // The open call ended (`end`: its end marker, or empty when it was left open): a call, or text.
  void CloseCall(std::string_view end, bool left_open, ChatDelta* out);
  void Failed(std::string raw, ChatDelta* out);  // a call that is no call: its text goes back
  void CloseSection(std::string_view end, ChatDelta* out);
  void FlushGap(ChatDelta* out);  // text between a section's calls: space is dropped, else it is content
  void Warn(const std::string& why);

  const ToolCallSyntax syntax_;
  ToolParserOptions options_;
  MarkerScanner scanner_;
  State state_ = State::kContent;
  bool in_section_ = false;
  std::string call_text_;   // the open call's text after call_begin
  std::string held_space_;  // content whitespace held until it is known not to precede a call
  std::string call_space_;  // the whitespace before a call outside a section (given back if it fails)
  // A section is held as written until one of its calls reads well: a section with none comes
  // back as the text it was.
  bool section_good_ = false;
  std::string section_raw_;  // the section as written so far, from the whitespace before it
  std::string failed_raw_;   // calls of the section that failed before a good one
  std::string section_gap_;  // the section's text since its last marker
  int32_t calls_ = 0;        // calls emitted
  std::string warning_;
};

}  // namespace ls::chat
