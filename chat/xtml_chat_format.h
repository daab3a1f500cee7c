// XtmlChatFormat: Kimi K3's XTML chat (XtmlChat) served as a ChatFormat — the prompt rendered
// straight to ids, the reply read by XTML's own parser, <|end_of_msg|> a stop token. tool_choice
// "required" and "none" are written into the prompt as XTML's tool-choice system message; a named
// function leaves the choice to the model, as K3's reference encoder does. Immutable; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chat/chat_format.h"
#include "chat/xtml_chat.h"

namespace ls::chat {

class XtmlChatFormat final : public ChatFormat {
 public:
  explicit XtmlChatFormat(XtmlChat chat) : chat_(chat) {}

  absl::StatusOr<ChatPrompt> Render(const chat::ChatRequestInputs& inputs, const RenderOptions& options) const override;
  std::unique_ptr<ChatOutputParser> NewParser(const chat::ChatRequestInputs& inputs, const RenderOptions& options,
                                              const ChatPrompt& prompt) const override;
  bool parses_tool_calls() const override { return true; }
  bool forces_tool_calls() const override { return true; }
  bool renders_tools() const override { return true; }
  bool content_as_parts() const override { return true; }
  std::vector<int32_t> stop_token_ids() const override { return {chat_.end_of_msg_id()}; }
  std::string Describe() const override;

 private:
  // The inputs with the request's tool_choice among the chat_template_kwargs XTML reads (unless
  // the kwargs already set one).
  static chat::ChatRequestInputs WithToolChoice(const chat::ChatRequestInputs& inputs, const ToolChoice& choice);

  XtmlChat chat_;
};

}  // namespace ls::chat
