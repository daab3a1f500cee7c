// XtmlChatFormat: the request's tool_choice handed to XTML's renderer, and its parser.
#include "chat/xtml_chat_format.h"

#include "nlohmann/json.hpp"

namespace ls::chat {

using ojson = nlohmann::ordered_json;

chat::ChatRequestInputs XtmlChatFormat::WithToolChoice(const chat::ChatRequestInputs& inputs, const ToolChoice& choice) {
  chat::ChatRequestInputs in = inputs;
  const bool has_tools = in.tools.is_array() && !in.tools.empty();
  if (!has_tools || !in.chat_template_kwargs.is_object() || in.chat_template_kwargs.contains("tool_choice")) return in;
  switch (choice.mode) {
    case ToolChoice::Mode::kRequired:
      in.chat_template_kwargs["tool_choice"] = "required";
      break;
    case ToolChoice::Mode::kNone:
      in.chat_template_kwargs["tool_choice"] = "none";
      break;
    case ToolChoice::Mode::kFunction:
      in.chat_template_kwargs["tool_choice"] = {{"type", "function"}, {"function", {{"name", choice.function}}}};
      break;
    case ToolChoice::Mode::kAuto:
      break;
  }
  return in;
}

absl::StatusOr<ChatPrompt> XtmlChatFormat::Render(const chat::ChatRequestInputs& inputs,
                                                  const RenderOptions& options) const {
  auto ids = chat_.Render(WithToolChoice(inputs, options.tool_choice));
  if (!ids.ok()) return absl::InvalidArgumentError(ids.status().message());
  if (ids->empty()) return absl::InvalidArgumentError("the chat renders to no tokens");
  ChatPrompt p;
  p.ids = std::move(*ids);
  return p;
}

std::unique_ptr<ChatOutputParser> XtmlChatFormat::NewParser(const chat::ChatRequestInputs& inputs,
                                                            const RenderOptions& options, const ChatPrompt&) const {
  return chat_.NewParser(WithToolChoice(inputs, options.tool_choice));
}

std::string XtmlChatFormat::Describe() const {
  const ojson d = {{"chat_format", "xtml"},
                   {"chat_template", "Kimi K3 XTML (rendered in code)"},
                   {"tool_call_parser", "xtml"},
                   {"reasoning_parser", "xtml"},
                   {"end_of_msg_id", chat_.end_of_msg_id()}};
  const std::string s = d.dump();
  return s.substr(1, s.size() - 2);
}

}  // namespace ls::chat
