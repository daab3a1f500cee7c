// XtmlChat: Kimi K3's chat format (XTML, docs/k3.md "Chat format (XTML)") for the server — renders a
// chat request straight to token ids and makes the parser that reads a generated answer back as
// reasoning, content and tool calls. Bound to one tokenizer, which must outlive it and its
// parsers; immutable, cheap to copy, thread-safe (each parser is used by one choice).
//
// The prompt's layout and the choices it makes are described in xtml_render.h, the parser's in
// xtml_parser.h. Generation stops on end_of_msg_id().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/chat_output_parser.h"
#include "chat/chat_template.h"
#include "chat/xtml_syntax.h"
#include "tokenizer/tokenizer.h"

namespace ls::chat {

class XtmlChat {
 public:
  // Finds the control ids <|open|>, <|close|>, <|sep|> and <|end_of_msg|> in `tokenizer`; an error
  // names the ones it lacks (a tokenizer without them is not a K3 tokenizer).
  static absl::StatusOr<XtmlChat> ForTokenizer(const tok::Tokenizer& tokenizer);

  // The prompt's ids. Errors are InvalidArgument naming the request field.
  absl::StatusOr<std::vector<int32_t>> Render(const chat::ChatRequestInputs& inputs) const;
  // A parser for one choice of this request: it starts where the prompt left the model — in the
  // think channel, the response channel (thinking off, or continuing a message's text), or
  // outside any message (no generation prompt).
  std::unique_ptr<ChatOutputParser> NewParser(const chat::ChatRequestInputs& inputs) const;

  int32_t end_of_msg_id() const { return ids_.end_of_msg; }
  const xtml::ControlIds& control_ids() const { return ids_; }

 private:
  XtmlChat(const tok::Tokenizer* tokenizer, xtml::ControlIds ids) : tokenizer_(tokenizer), ids_(ids) {}

  const tok::Tokenizer* tokenizer_;
  xtml::ControlIds ids_;
};

}  // namespace ls::chat
