// ChoiceStream: one choice's engine outputs as the OpenAI API returns them — with echo, its
// prompt first; without generation (echo, max_tokens 0), the engine's token dropped; for chat, the
// text read by the chat format's parser into reasoning, content and tool calls. One per choice of
// a request, on the thread that handles it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "server/chat_reply.h"
#include "server/openai_protocol.h"

namespace ls::server {

class ChoiceStream {
 public:
  ChoiceStream(const ParsedRequest& r, int32_t index, const ApiContext* ctx, const std::string& request_id);
  // The delta of the choice's next output (the first call gives the first delta).
  Choice Next(RequestOutput& o);

 private:
  const ParsedRequest& r_;
  const int32_t index_;
  bool first_ = true;
  std::optional<ChatReply> chat_;
};

}  // namespace ls::server
