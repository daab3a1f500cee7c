// ChoiceStream.
#include "server/choice_stream.h"

namespace ls::server {

ChoiceStream::ChoiceStream(const ParsedRequest& r, int32_t index, const ApiContext* ctx, const std::string& request_id)
    : r_(r), index_(index) {
  if (r.chat) chat_.emplace(r.chat, ctx, request_id);
}

Choice ChoiceStream::Next(RequestOutput& o) {
  Choice c = OutputToDelta(r_, index_, o, first_);
  first_ = false;
  if (chat_) {
    chat::ChatDelta d = chat_->Next(c.token_ids, c.text, o.finished());
    c.text = std::move(d.content);
    c.reasoning = std::move(d.reasoning);
    c.tool_calls = std::move(d.tool_calls);
    c.tool_calls_made = chat_->made_calls();
  }
  return c;
}

}  // namespace ls::server
