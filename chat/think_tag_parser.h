// ThinkTagParser: splits reasoning written between <think> and </think> from the reply, as
// Qwen3, DeepSeek-R1, GLM-4.5 and Kimi-K2-Thinking write it, and passes the reply on to an inner
// parser (tool calls, or content only) through the same interface. Reasoning is recognised only at
// the start of the output — where the model opens <think> itself, or where the prompt already
// opened it (a template that ends the generation prompt with "<think>\n"); a tag later in the
// reply is content. Reasoning cut off by the end of generation stays reasoning. The whitespace
// between </think> and the reply is dropped. One per choice.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "chat/chat_output_parser.h"
#include "chat/marker_scanner.h"

namespace ls::chat {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// Whether `prompt` ends inside a think block: its last <think> comes after its last </think>.
bool PromptOpensThink(std::string_view prompt);

class ThinkTagParser final : public ChatOutputParser {
 public:
  // `inner` reads the reply; `in_reasoning`: the prompt opened the think block.
  ThinkTagParser(std::unique_ptr<ChatOutputParser> inner, bool in_reasoning, MarkerTokens marker_tokens = {});
  ChatDelta Feed(int32_t token_id, std::string_view text) override;
  ChatDelta Finish() override;
  const std::string& warning() const override { return inner_->warning(); }

 private:
  enum class State { kStart, kReasoning, kReply };
  void Process(int32_t token_id, bool final, ChatDelta* out);
  void ToReply(int32_t token_id, std::string_view text, ChatDelta* out);

  std::unique_ptr<ChatOutputParser> inner_;
  MarkerTokens marker_tokens_;
  State state_;
  bool reply_started_ = false;  // the reply has had a non-space character (leading space is dropped)
  MarkerScanner scanner_;
};

// Everything is content: the parser of a chat without reasoning or tool parsing.
class ContentParser final : public ChatOutputParser {
 public:
  ChatDelta Feed(int32_t, std::string_view text) override {
    ChatDelta d;
    d.content.assign(text);
    return d;
  }
  ChatDelta Finish() override { return {}; }
  const std::string& warning() const override { return warning_; }

 private:
  std::string warning_;
};

}  // namespace ls::chat
