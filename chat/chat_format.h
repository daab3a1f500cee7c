// ChatFormat: how a model's chat is written into a prompt and its reply read back. Two kinds:
// a Jinja chat template rendered to text and then encoded, with the output parsers chosen for the
// model (JinjaChatFormat), or a format that renders straight to token ids and brings its own
// parser (Kimi K3's XTML, chat/xtml_chat). NewChatFormat picks one for a model. A format
// is immutable once made; Render and NewParser are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/chat_output_parser.h"
#include "chat/chat_template.h"
#include "structured/output_constraint.h"
#include "tokenizer/tokenizer.h"

namespace ls::chat {

// OpenAI's tool_choice.
struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kFunction };
  Mode mode = Mode::kAuto;
  std::string function;  // kFunction: the function that must be called
};

struct RenderOptions {
  ToolChoice tool_choice;
  bool add_special_tokens = false;  // run the tokenizer's post-processor on the rendered text
};

struct ChatPrompt {
  std::vector<int32_t> ids;
  std::string text;  // the rendered prompt, for formats rendered as text (else empty)
  // The end of `text` that is already part of the reply: the final message continued
  // (continue_final_message), or the opening of a call the server forces. The parser reads it
  // before the generated text; what it yields is not returned, only what it completes.
  std::string prefill;
};

class ChatFormat {
 public:
  virtual ~ChatFormat() = default;
  // The prompt for a request. Errors are InvalidArgument with a message for the client.
  virtual absl::StatusOr<ChatPrompt> Render(const chat::ChatRequestInputs& inputs,
                                            const RenderOptions& options) const = 0;
  // A parser for one choice of the reply to `prompt` (rendered from the same inputs and options).
  virtual std::unique_ptr<ChatOutputParser> NewParser(const chat::ChatRequestInputs& inputs,
                                                      const RenderOptions& options, const ChatPrompt& prompt) const = 0;

  // Whether the reply is read for tool calls (with tools given and tool_choice not "none").
  virtual bool parses_tool_calls() const = 0;
  // Whether Render makes a call happen for tool_choice "required" or a named function.
  virtual bool forces_tool_calls() const = 0;
  // Whether the prompt shows the model the request's tools at all.
  virtual bool renders_tools() const = 0;
  // Whether message content goes to the renderer as OpenAI's list of text parts (the template
  // loops over content); else each message's text parts are joined with newlines, as vLLM does.
  virtual bool content_as_parts() const = 0;
  // The grammar the reply to `prompt` (rendered from these inputs and options) must follow, given
  // the request's own constraint on its content (response_format; may be empty): its cache key and
  // how to build it; nullopt when nothing constrains the reply. The grammar starts where the
  // prompt's text ends, before its prefill (which the caller feeds it).
  struct ReplyConstraint {
    std::string key;
    std::function<absl::StatusOr<structured::Grammar>()> build;
  };
  virtual std::optional<ReplyConstraint> ReplyGrammar(const chat::ChatRequestInputs& inputs, const RenderOptions& options,
                                                      const ChatPrompt& prompt,
                                                      const structured::OutputConstraint& content,
                                                      bool parallel_tool_calls) const;
  // Token ids that end the reply besides the model's end-of-sequence ids.
  virtual std::vector<int32_t> stop_token_ids() const { return {}; }
  // What serves the chat, as JSON object fields for the start log.
  virtual std::string Describe() const = 0;
};

struct ChatFormatOptions {
  std::string model_dir;
  std::string chat_template_file;             // --chat_template: replaces the model's template
  std::string tool_call_parser = "auto";      // auto (the family's), none, or a ToolCallFormat name
  std::string reasoning_parser = "auto";      // auto (think when the template writes </think>), none, think
  std::string content_format = "auto";        // --chat_template_content_format: auto, string, openai
  // What the model's family writes (its Family's tool_call_format and reasoning_format), for
  // the parsers left at auto.
  std::string family_tool_call_format, family_reasoning_format;
  const tok::Tokenizer* tokenizer = nullptr;  // must outlive the format
};

absl::StatusOr<std::unique_ptr<ChatFormat>> NewChatFormat(const ChatFormatOptions& options);

// Whether a model's chat is Kimi K3's XTML: its family writes XTML, or its tokenizer has XTML's
// control tokens while it ships no chat template (and none was given).
bool UsesXtmlChat(const ChatFormatOptions& options, bool has_template);

}  // namespace ls::chat
