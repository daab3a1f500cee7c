// XtmlChat: control-id lookup, and the renderer and parser bound to one tokenizer.
#include "chat/xtml_chat.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chat/xtml_parser.h"
#include "chat/xtml_render.h"

namespace ls::chat {

absl::StatusOr<XtmlChat> XtmlChat::ForTokenizer(const tok::Tokenizer& tokenizer) {
  xtml::ControlIds ids;
  std::vector<std::string> missing;
  auto find = [&](std::string_view token, int32_t* id) {
    const int32_t found = tokenizer.TokenToId(std::string(token));
    if (found >= 0 && tokenizer.IsSpecial(found)) {
      *id = found;
    } else {
      missing.emplace_back(token);
    }
  };
  find(xtml::kOpenToken, &ids.open);
  find(xtml::kCloseToken, &ids.close);
  find(xtml::kSepToken, &ids.sep);
  find(xtml::kEndOfMsgToken, &ids.end_of_msg);
  if (!missing.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        "the tokenizer has no control token ", absl::StrJoin(missing, ", "),
        ": Kimi K3's XTML chat format needs <|open|>, <|close|>, <|sep|> and <|end_of_msg|> as special tokens"));
  return XtmlChat(&tokenizer, ids);
}

absl::StatusOr<std::vector<int32_t>> XtmlChat::Render(const chat::ChatRequestInputs& inputs) const {
  return xtml::RenderXtml(*tokenizer_, ids_, inputs);
}

std::unique_ptr<ChatOutputParser> XtmlChat::NewParser(const chat::ChatRequestInputs& inputs) const {
  return std::make_unique<xtml::XtmlParser>(tokenizer_, ids_, xtml::PromptEndOf(inputs));
}

}  // namespace ls::chat
