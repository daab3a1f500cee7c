// NewChatFormat: the chat format a model is served with, and its parsers from the flags.
#include "chat/chat_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chat/jinja_chat_format.h"
#include "chat/think_tag_parser.h"
#include "chat/tool_call_format.h"
#include "chat/xtml_chat.h"
#include "chat/xtml_chat_format.h"

namespace ls::chat {

bool UsesXtmlChat(const ChatFormatOptions& options, bool has_template) {
  if (!options.chat_template_file.empty()) return false;  // a template given on the command line wins
  if (options.family_tool_call_format == "xtml") return true;
  if (has_template || !options.tokenizer) return false;
  for (const char* token : {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"})
    if (options.tokenizer->TokenToId(token) < 0) return false;
  return true;
}

std::optional<ChatFormat::ReplyConstraint> ChatFormat::ReplyGrammar(const chat::ChatRequestInputs&, const RenderOptions&,
                                                                    const ChatPrompt&,
                                                                    const structured::OutputConstraint& content,
                                                                    bool) const {
  // The content's constraint alone, from the reply's start.
  if (content.empty()) return std::nullopt;
  return ReplyConstraint{content.Key(), [content] { return structured::BuildGrammar(content); }};
}

absl::StatusOr<std::unique_ptr<ChatFormat>> NewChatFormat(const ChatFormatOptions& options) {
  if (!options.tokenizer) return absl::FailedPreconditionError("chat needs the model's tokenizer");
  auto tmpl = chat::ChatTemplate::ForModelDir(options.model_dir, options.chat_template_file);
  if (!tmpl.ok()) return tmpl.status();
  const bool has_template = tmpl->origin() != chat::ChatTemplate::ChatML().origin();

  // Kimi K3's XTML chat renders straight to ids and brings its own parsers.
  const std::string& parser = options.tool_call_parser;
  if (parser == "xtml" || (parser == "auto" && UsesXtmlChat(options, has_template))) {
    if (!options.chat_template_file.empty())
      return absl::InvalidArgumentError(
          "--tool_call_parser xtml: Kimi K3's XTML chat renders its own prompt, so --chat_template cannot go with it");
    if (options.reasoning_parser != "auto")
      return absl::InvalidArgumentError(absl::StrCat("--reasoning_parser ", options.reasoning_parser,
                                                     ": Kimi K3's XTML chat reads its reasoning from its think "
                                                     "channel; leave the flag at auto"));
    auto xtml = XtmlChat::ForTokenizer(*options.tokenizer);
    if (!xtml.ok()) return xtml.status();
    return std::make_unique<XtmlChatFormat>(*xtml);
  }

  const ToolCallFormat* tools = nullptr;
  std::string tool_name = options.tool_call_parser;
  if (tool_name == "auto") tool_name = options.family_tool_call_format == "xtml" ? "" : options.family_tool_call_format;
  if (!tool_name.empty() && tool_name != "none") {
    tools = FindToolCallFormat(tool_name);
    if (!tools)
      return absl::InvalidArgumentError(absl::StrCat("--tool_call_parser: unknown parser '", tool_name,
                                                     "' (known: auto, none, ",
                                                     absl::StrJoin(ToolCallFormatNames(), ", "), ", xtml)"));
  }
  bool think = false;
  std::string reasoning = options.reasoning_parser;
  const std::string& family_reasoning = options.family_reasoning_format;
  if (reasoning == "auto" && (family_reasoning == "think" || family_reasoning == "none")) reasoning = family_reasoning;
  if (reasoning == "auto") {
    think = tmpl->source().find(kThinkClose) != std::string::npos;
  } else if (reasoning == "think") {
    think = true;
  } else if (reasoning != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("--reasoning_parser: unknown parser '", reasoning, "' (known: auto, none, think)"));
  }
  ContentFormat content;
  if (std::string error; !ParseContentFormat(options.content_format, &content, &error))
    return absl::InvalidArgumentError(error);
  return std::make_unique<JinjaChatFormat>(std::move(*tmpl), options.tokenizer, tools, think,
                                           std::function<std::string()>{}, content);
}

}  // namespace ls::chat
