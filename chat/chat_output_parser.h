// ChatOutputParser: splits a chat completion's generated tokens, as they arrive, into what the
// OpenAI API returns apart — reasoning_content, content and tool_calls — in the pieces a
// streamed response sends as deltas. One parser per choice; it owns nothing outside itself.
// Implementations: think-tag reasoning, the tool-call formats of the families (Hermes/Qwen,
// DeepSeek-V3, Kimi-K2) and Kimi K3's XTML channels. Output a parser cannot read as its format
// (an unclosed tag, arguments that are not JSON) is returned as content, with a warning to log:
// never an error to the client.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ls::chat {

// A piece of one tool call, as OpenAI's streamed `tool_calls` deltas carry it: the call's first
// delta has its id and name, the later ones only more of its arguments' JSON text.
struct ToolCallDelta {
  int32_t index = 0;       // the call's position in the message's tool_calls
  std::string id;          // on the first delta of the call ("call_..."), else empty
  std::string name;        // on the first delta of the call, else empty
  std::string arguments;   // the next piece of the arguments, a JSON object's text once joined
};

// What one step of generation adds to the message.
struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  // Appends `next` (merging the argument pieces of a call already present).
  void Append(ChatDelta next);
};

class ChatOutputParser {
 public:
  virtual ~ChatOutputParser() = default;
  // The next generated token: its id and its text (the incremental detokenizer's output for it,
  // which may be empty while a UTF-8 character is incomplete). Formats marked by control tokens
  // (XTML) read the ids; text formats read the text. What is returned is final: text that may
  // still turn out to open a marker is held back until it is decided.
  virtual ChatDelta Feed(int32_t token_id, std::string_view text) = 0;
  // Generation ended (stop, length or cancel): releases what was held back. A tool call or
  // channel left open is returned as content and noted in warning().
  virtual ChatDelta Finish() = 0;
  // Why some output fell back to content, for the log; empty when none did.
  virtual const std::string& warning() const = 0;
};

}  // namespace ls::chat
