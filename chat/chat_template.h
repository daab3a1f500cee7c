// ChatTemplate: renders a chat request into a prompt with the model's own Jinja chat template
// (jinja), as transformers' apply_chat_template does: same template choice,
// message normalisation, special tokens and variables, byte-identical output. Built-in ChatML is
// the fallback for models without a template. Immutable and cheap to copy; Render is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ls::chat {

struct ChatMessage {
  std::string role;  // system, user, assistant, tool, ...
  std::string content;
};

// What a chat request gives the template. JSON is passed through as given (key order kept, as
// the template's tojson prints it): the template decides how to read content parts, tool calls
// and reasoning.
struct ChatRequestInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // [{"role": ..., "content": ...}, ...]
  nlohmann::ordered_json tools;      // null: no tools (the template sees none); else a list of tool JSON
  nlohmann::ordered_json documents;  // null, or a list of documents for RAG templates
  bool add_generation_prompt = true;
  // Render so that the model continues the last (assistant) message: the prompt ends right after
  // its content. Incompatible with add_generation_prompt.
  bool continue_final_message = false;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();  // extra variables
};

// Special tokens the template sees as variables (bos_token, eos_token, ...), name to text.
using SpecialTokens = std::vector<std::pair<std::string, std::string>>;

class ChatTemplate {
 public:
  // The template of model directory `dir`, as transformers chooses it: DIR/chat_template.jinja
  // (with DIR/additional_chat_templates/*.jinja as named templates) when present, else
  // tokenizer_config.json's chat_template (a string, or a list of {name, template}); ChatML when
  // the model has none. `template_file`, when not empty, replaces the model's template (the
  // --chat_template flag). Special tokens come from tokenizer_config.json either way.
  static absl::StatusOr<ChatTemplate> ForModelDir(const std::string& dir, const std::string& template_file = "");
  static absl::StatusOr<ChatTemplate> FromString(const std::string& source, SpecialTokens special_tokens = {});
  static absl::StatusOr<ChatTemplate> FromFile(const std::string& path, SpecialTokens special_tokens = {});
  static ChatTemplate ChatML();  // <|im_start|>role\ncontent<|im_end|>\n ..., no default system message

  // Renders the request. Errors are InvalidArgument (or ResourceExhausted past a render limit) with
  // a message for the client: the template's raise_exception() text as it gave it, or what failed
  // and on which template line.
  absl::StatusOr<std::string> Render(const ChatRequestInputs& inputs) const;
  // Plain role/content messages.
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  // The default template's source, and where the templates came from (for logs).
  const std::string& source() const;
  const std::string& origin() const;
  const SpecialTokens& special_tokens() const;
  bool has_template(const std::string& name) const;  // "default", "tool_use", ...

 private:
  struct State;
  explicit ChatTemplate(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  static absl::StatusOr<ChatTemplate> Build(std::vector<std::pair<std::string, std::string>> named_sources,
                                            SpecialTokens special_tokens, std::string origin);
  std::shared_ptr<const State> state_;
};

}  // namespace ls::chat
