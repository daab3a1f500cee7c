// JinjaChatFormat: render, force, encode; parsers composed per choice.
#include "chat/jinja_chat_format.h"

#include "absl/strings/str_cat.h"
#include "chat/reply_grammar.h"
#include "chat/think_tag_parser.h"
#include "nlohmann/json.hpp"

namespace ls::chat {
namespace {

using ojson = nlohmann::ordered_json;

// The text continue_final_message continues: the final message's content, or its last text part.
std::string FinalText(const ojson& messages) {
  if (!messages.is_array() || messages.empty() || !messages.back().is_object()) return "";
  auto c = messages.back().find("content");
  if (c == messages.back().end()) return "";
  if (c->is_string()) return c->get<std::string>();
  if (c->is_array()) {
    for (auto part = c->rbegin(); part != c->rend(); ++part)
      if (part->is_object() && part->contains("text") && (*part)["text"].is_string())
        return (*part)["text"].get<std::string>();
  }
  return "";
}

// Tool calls made earlier in the conversation (Kimi-K2 numbers calls across it).
int HistoryCalls(const ojson& messages) {
  int n = 0;
  if (!messages.is_array()) return 0;
  for (const auto& m : messages)
    if (m.is_object() && m.contains("tool_calls") && m["tool_calls"].is_array())
      n += static_cast<int>(m["tool_calls"].size());
  return n;
}

bool HasTools(const chat::ChatRequestInputs& in) { return in.tools.is_array() && !in.tools.empty(); }

}  // namespace

JinjaChatFormat::JinjaChatFormat(chat::ChatTemplate chat_template, const tok::Tokenizer* tokenizer,
                                 const ToolCallFormat* tools, bool think, std::function<std::string()> call_ids,
                                 ContentFormat content)
    : template_(std::move(chat_template)),
      tokenizer_(tokenizer),
      tools_(tools),
      think_(think),
      renders_tools_(template_.source().find("tools") != std::string::npos),
      content_as_parts_((content == ContentFormat::kAuto ? DetectContentFormat(template_.source()) : content) ==
                        ContentFormat::kOpenAi),
      content_format_detected_(content == ContentFormat::kAuto),
      call_ids_(std::move(call_ids)) {
  std::vector<std::string> markers = {std::string(kThinkOpen), std::string(kThinkClose)};
  if (tools_)
    for (std::string& m : tools_->markers()) markers.push_back(std::move(m));
  marker_tokens_ = MarkerTokens(tokenizer_, markers);
  markers_ = std::move(markers);
}

absl::StatusOr<ChatPrompt> JinjaChatFormat::Render(const chat::ChatRequestInputs& inputs,
                                                   const RenderOptions& options) const {
  auto text = template_.Render(inputs);
  if (!text.ok()) return absl::InvalidArgumentError(text.status().message());
  ChatPrompt p;
  p.text = std::move(*text);
  if (inputs.continue_final_message) {
    const std::string final_text = FinalText(inputs.messages);
    if (!final_text.empty() && p.text.size() >= final_text.size() &&
        p.text.compare(p.text.size() - final_text.size(), final_text.size(), final_text) == 0)
      p.prefill = final_text;
  }
  const ToolChoice& choice = options.tool_choice;
  if (tools_ && HasTools(inputs) &&
      (choice.mode == ToolChoice::Mode::kRequired || choice.mode == ToolChoice::Mode::kFunction)) {
    // The reply starts as a call: a think block the prompt left open is closed first.
    std::string forced = think_ && PromptOpensThink(p.text) ? std::string(kThinkClose) + "\n\n" : "";
    forced += tools_->forced_call_prefix(choice.mode == ToolChoice::Mode::kFunction ? choice.function : "",
                                         HistoryCalls(inputs.messages));
    p.text += forced;
    p.prefill += forced;
  }
  auto ids = tokenizer_->Encode(p.text, tok::EncodeOptions{options.add_special_tokens, tok::SpecialText::kMatch});
  if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat("the rendered chat: ", ids.status().message()));
  if (ids->empty()) return absl::InvalidArgumentError("the chat renders to no tokens");
  p.ids = std::move(*ids);
  return p;
}

std::unique_ptr<ChatOutputParser> JinjaChatFormat::NewParser(const chat::ChatRequestInputs& inputs,
                                                             const RenderOptions& options,
                                                             const ChatPrompt& prompt) const {
  std::unique_ptr<ChatOutputParser> parser;
  if (tools_ && HasTools(inputs) && options.tool_choice.mode != ToolChoice::Mode::kNone) {
    parser = tools_->NewParser({marker_tokens_, call_ids_});
  } else {
    parser = std::make_unique<ContentParser>();
  }
  if (think_) {
    const std::string_view before = std::string_view(prompt.text).substr(0, prompt.text.size() - prompt.prefill.size());
    parser = std::make_unique<ThinkTagParser>(std::move(parser), PromptOpensThink(before), marker_tokens_);
  }
  // The prefill is read first when it opens something the reply goes on with (a call, a think
  // block); what that yields is the prompt's, not the reply's. Plain text is left out, so that
  // whitespace at its end is not held over into the reply.
  bool opens = false;
  for (const std::string& m : markers_) opens = opens || prompt.prefill.find(m) != std::string::npos;
  if (opens) parser->Feed(-1, prompt.prefill);
  return parser;
}

std::optional<ChatFormat::ReplyConstraint> JinjaChatFormat::ReplyGrammar(const chat::ChatRequestInputs& inputs,
                                                                         const RenderOptions& options,
                                                                         const ChatPrompt& prompt,
                                                                         const structured::OutputConstraint& content,
                                                                         bool parallel_tool_calls) const {
  ReplyGrammarSpec spec;
  if (tools_ && HasTools(inputs) && options.tool_choice.mode != ToolChoice::Mode::kNone) {
    spec.tools = tools_;
    spec.functions = ToolSpecs(inputs.tools);
    spec.choice = options.tool_choice;
    spec.parallel_tool_calls = parallel_tool_calls;
  }
  if (!spec.tools && content.empty()) return std::nullopt;
  spec.content = content;
  if (think_) {
    const std::string_view before = std::string_view(prompt.text).substr(0, prompt.text.size() - prompt.prefill.size());
    spec.reasoning = PromptOpensThink(before) ? ReplyGrammarSpec::Reasoning::kOpen : ReplyGrammarSpec::Reasoning::kMayOpen;
  }
  const tok::Tokenizer* tokenizer = tokenizer_;
  spec.spell = [tokenizer](std::string_view marker) {
    const int32_t id = tokenizer->TokenToId(std::string(marker));
    return id >= 0 && tokenizer->IsSpecial(id) ? structured::SpecialToken(marker) : std::string(marker);
  };
  std::string key = ReplyGrammarKey(spec);
  return ReplyConstraint{std::move(key), [spec = std::move(spec)] { return BuildReplyGrammar(spec); }};
}

std::string JinjaChatFormat::Describe() const {
  const ojson d = {{"chat_format", "jinja"},
                   {"chat_template", template_.origin()},
                   {"tool_call_parser", tools_ ? tools_->name : "none"},
                   {"reasoning_parser", think_ ? "think" : "none"},
                   {"content_format", content_as_parts_ ? "openai" : "string"},
                   {"content_format_from", content_format_detected_ ? "template" : "flag"},
                   {"template_renders_tools", renders_tools_}};
  const std::string s = d.dump();
  return s.substr(1, s.size() - 2);
}

}  // namespace ls::chat
