// JinjaChatFormat: a chat written by a Jinja chat template (the model's own, --chat_template, or
// ChatML) and encoded with control tokens matched, whose reply is read by the output parsers
// chosen for the model: an optional tool-call format and optional think-tag reasoning, composed
// as ThinkTagParser(tool parser). It forces a call for tool_choice "required" or a named function
// by ending the prompt with the opening of a call in the model's format. Immutable; thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chat/chat_format.h"
#include "chat/content_format.h"
#include "chat/tool_call_format.h"

namespace ls::chat {

class JinjaChatFormat final : public ChatFormat {
 public:
  // `tools`: the tool-call format, or null (calls are not parsed); `think`: <think> reasoning is
  // split off; `call_ids` names calls whose text has no id (default: random, as vLLM does). The
  // tokenizer must outlive the format.
  // `content`: how messages' content reaches the template (kAuto: as the template reads it,
  // content_format.h).
  JinjaChatFormat(chat::ChatTemplate chat_template, const tok::Tokenizer* tokenizer, const ToolCallFormat* tools,
                  bool think, std::function<std::string()> call_ids = {}, ContentFormat content = ContentFormat::kAuto);

  absl::StatusOr<ChatPrompt> Render(const chat::ChatRequestInputs& inputs, const RenderOptions& options) const override;
  std::unique_ptr<ChatOutputParser> NewParser(const chat::ChatRequestInputs& inputs, const RenderOptions& options,
                                              const ChatPrompt& prompt) const override;
  bool parses_tool_calls() const override { return tools_ != nullptr; }
  bool forces_tool_calls() const override { return tools_ != nullptr; }
  bool renders_tools() const override { return renders_tools_; }
  bool content_as_parts() const override { return content_as_parts_; }
  std::optional<ReplyConstraint> ReplyGrammar(const chat::ChatRequestInputs& inputs, const RenderOptions& options,
                                              const ChatPrompt& prompt, const structured::OutputConstraint& content,
                                              bool parallel_tool_calls) const override;
  std::string Describe() const override;

  const chat::ChatTemplate& chat_template() const { return template_; }

 private:
  chat::ChatTemplate template_;
  const tok::Tokenizer* tokenizer_;
  const ToolCallFormat* tools_;
  bool think_;
  bool renders_tools_;
  bool content_as_parts_;
  bool content_format_detected_;  // content_as_parts_ read from the template (else set by the flag)
  std::vector<std::string> markers_;  // the parsers' markers (think tags, the tool format's)
  MarkerTokens marker_tokens_;
  std::function<std::string()> call_ids_;
};

}  // namespace ls::chat
