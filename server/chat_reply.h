// ChatReply: one choice of a chat reply read through the chat format's parser, as the API returns
// it — reasoning dropped unless the request includes it, calls after the first dropped unless it
// allows parallel calls, and what the parser returned as content instead of a call logged as a
// warning when the reply ends. Used by both front ends; one per choice, not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_output_parser.h"
#include "server/api_context.h"
#include "server/chat_request.h"

namespace ls::server {

class ChatReply {
 public:
  ChatReply(std::shared_ptr<const ChatSession> session, const ApiContext* ctx, std::string request_id);
  // What one engine output adds: its tokens and text; `finished` on the last output.
  chat::ChatDelta Next(const std::vector<int32_t>& token_ids, std::string_view text, bool finished);
  // Whether the reply has called tools.
  bool made_calls() const { return made_calls_; }

 private:
  chat::ChatDelta Keep(chat::ChatDelta d);  // what the request asks to get of a delta

  std::shared_ptr<const ChatSession> session_;
  const ApiContext* ctx_;
  std::string request_id_;
  std::unique_ptr<chat::ChatOutputParser> parser_;
  bool made_calls_ = false;
  bool dropped_calls_ = false;
};

}  // namespace ls::server
