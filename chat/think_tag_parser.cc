// ThinkTagParser.
#include "chat/think_tag_parser.h"

namespace ls::chat {

bool PromptOpensThink(std::string_view prompt) {
  const size_t open = prompt.rfind(kThinkOpen);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(kThinkClose);
  return close == std::string_view::npos || close < open;
}

ThinkTagParser::ThinkTagParser(std::unique_ptr<ChatOutputParser> inner, bool in_reasoning, MarkerTokens marker_tokens)
    : inner_(std::move(inner)),
      marker_tokens_(std::move(marker_tokens)),
      state_(in_reasoning ? State::kReasoning : State::kStart) {}

ChatDelta ThinkTagParser::Feed(int32_t token_id, std::string_view text) {
  ChatDelta out;
  const std::string_view t = marker_tokens_.Text(token_id, text);
  if (state_ == State::kReply && scanner_.buffered().empty()) {
    ToReply(token_id, t, &out);  // the common case once reasoning is over: straight through
    return out;
  }
  scanner_.Push(t);
  Process(token_id, /*final=*/false, &out);
  return out;
}

ChatDelta ThinkTagParser::Finish() {
  ChatDelta out;
  Process(-1, /*final=*/true, &out);
  out.Append(inner_->Finish());
  return out;
}

void ThinkTagParser::ToReply(int32_t token_id, std::string_view text, ChatDelta* out) {
  if (!reply_started_) {
    const std::string_view body = TrimSpace(text);
    if (body.empty()) return;  // nothing but space yet
    text.remove_prefix(text.find(body.front()));
    reply_started_ = true;
  }
  out->Append(inner_->Feed(token_id, text));
}

void ThinkTagParser::Process(int32_t token_id, bool final, ChatDelta* out) {
  for (;;) {
    if (state_ == State::kStart) {
      // Leading space, then either <think> (reasoning) or anything else (the reply).
      std::string_view after_space = scanner_.buffered();
      while (!after_space.empty() && IsAllSpace(after_space.substr(0, 1))) after_space.remove_prefix(1);
      if (after_space.substr(0, kThinkOpen.size()) == kThinkOpen) {
        scanner_.Next({kThinkOpen});  // drops the space and the tag
        state_ = State::kReasoning;
        continue;
      }
      const bool may_open = kThinkOpen.substr(0, after_space.size()) == after_space;
      if (may_open && !final) return;  // still undecided
      state_ = State::kReply;
      reply_started_ = true;  // no reasoning: the reply is the output exactly
      ToReply(token_id, scanner_.TakeAll(), out);
      return;
    }
    if (state_ == State::kReasoning) {
      MarkerScanner::Piece p = scanner_.Next({kThinkClose}, final);
      out->reasoning += p.text;
      if (p.marker < 0) return;
      state_ = State::kReply;
      continue;
    }
    ToReply(token_id, scanner_.TakeAll(), out);
    return;
  }
}

}  // namespace ls::chat
