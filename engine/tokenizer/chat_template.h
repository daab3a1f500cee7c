// ChatTemplate: renders chat messages into a prompt. ChatML is built in; a `chat_template` from
// tokenizer_config.json is used only when it is recognised as a built-in (whitespace-insensitive
// comparison with the known ChatML variants), otherwise loading fails with a clear error.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ls::tok {

struct ChatMessage {
  std::string role;  // system, user, assistant (tool messages are rendered with their role too)
  std::string content;
};

class ChatTemplate {
 public:
  enum class Kind {
    kChatML,                  // <|im_start|>role\ncontent<|im_end|>\n ...
    kChatMLDefaultSystem,     // as kChatML, with a default system message when none is given (Qwen2)
  };

  // The template for a model directory: from DIR/tokenizer_config.json if present and
  // recognised, ChatML if the file or its chat_template is absent, an error otherwise.
  static absl::StatusOr<ChatTemplate> ForModelDir(const std::string& dir);
  // Recognises a Jinja template string.
  static absl::StatusOr<ChatTemplate> FromTemplateString(const std::string& jinja);
  static ChatTemplate ChatML() { return ChatTemplate(Kind::kChatML); }

  // Renders the conversation; with add_generation_prompt, opens an assistant turn.
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  Kind kind() const { return kind_; }

 private:
  explicit ChatTemplate(Kind k) : kind_(k) {}
  Kind kind_;
};

}  // namespace ls::tok
