// Kimi K3's XTML prompt, rendered from a chat request straight to token ids: the four structural
// markers are control ids, every text (tag names, attribute values, message bodies, tool JSON)
// is encoded with control-token text left as text, so a message cannot inject structure.
// Pure functions over an immutable tokenizer; thread-safe.
//
// Layout (docs/k3.md "Chat format (XTML)", and K3's reference encoder as public ports of it write it):
//   [tool-declare]  <|open|>message role="system" type="tool-declare"<|sep|># Tools\n...```json\n
//                   TOOLS\n```<|close|>message<|sep|><|end_of_msg|>   (TOOLS: compact, keys sorted)
//   [effort]        a `thinking-effort` system message, when thinking is on
//   messages        <|open|>message role="R"[ name="N"]<|sep|>BODY<|close|>message<|sep|><|end_of_msg|>
//                   tool results: role="tool" tool="NAME" index="N"; assistant BODY: think channel
//                   (thinking on only), response channel, then the tools block when it has calls
//   [tool-choice]   `required` / `none` system message      (not when continuing a message)
//   [response-fmt]  `json_object` / `json_schema` system message
//   prompt          <|open|>message role="assistant"<|sep|><|open|>think<|sep|> (or response)
// Each text piece is encoded on its own — tag name, ` key`, `="`, escaped value, `"`, each text
// part, each reasoning/argument body — as the reference encoder segments it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/chat_template.h"
#include "chat/xtml_syntax.h"
#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"

namespace ls::chat::xtml {

// What chat_template_kwargs select. Keys read (others are ignored):
//   thinking (bool, default true; `enable_thinking` is an alias) — the think channel;
//   thinking_effort ("low" | "high" | "max", default "max", as the reference encoder defaults it);
//   reasoning_effort (OpenAI's field, used where the two above are absent): "none" turns thinking
//     off, "minimal"/"low" -> low, "medium"/"high" -> high, "max" -> max;
//   tool_choice ("auto" | "required" | "none" | a named-function object; only required and none
//     write a message);
//   response_format ({"type": "text" | "json_object" | "json_schema", ...}).
struct XtmlOptions {
  bool thinking = true;
  std::string thinking_effort = "max";
  std::string tool_choice;                 // "required", "none" or "" (nothing to write)
  nlohmann::ordered_json response_format;  // null or an object with a known type
};
absl::StatusOr<XtmlOptions> ResolveXtmlOptions(const chat::ChatRequestInputs& inputs);

// Where a rendered prompt leaves the model.
enum class PromptEnd {
  kOutside,   // after a finished message (no generation prompt)
  kThink,     // inside the assistant message's think channel
  kResponse,  // inside its response channel
};
// Computed from the request alone (a request Render refuses gives kThink or kOutside).
PromptEnd PromptEndOf(const chat::ChatRequestInputs& inputs);

// Renders the request. Errors are InvalidArgument naming the field.
absl::StatusOr<std::vector<int32_t>> RenderXtml(const tok::Tokenizer& tokenizer, const ControlIds& ids,
                                                const chat::ChatRequestInputs& inputs);

}  // namespace ls::chat::xtml
