// ChatReply.
#include "server/chat_reply.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ls::server {

ChatReply::ChatReply(std::shared_ptr<const ChatSession> session, const ApiContext* ctx, std::string request_id)
    : session_(std::move(session)), ctx_(ctx), request_id_(std::move(request_id)), parser_(session_->NewParser()) {}

chat::ChatDelta ChatReply::Next(const std::vector<int32_t>& token_ids, std::string_view text, bool finished) {
  chat::ChatDelta d;
  if (token_ids.empty()) {
    if (!text.empty()) d.Append(parser_->Feed(-1, text));
  } else {
    // Outputs carry one token; the text goes with the first if ever there are more.
    for (size_t k = 0; k < token_ids.size(); ++k) d.Append(parser_->Feed(token_ids[k], k == 0 ? text : ""));
  }
  if (finished) {
    d.Append(parser_->Finish());
    if (!parser_->warning().empty()) {
      const nlohmann::json fields = {{"id", request_id_}, {"warning", parser_->warning()}};
      const std::string s = fields.dump();
      ctx_->Log(LogLevel::kWarning, "chat_output_fallback", s.substr(1, s.size() - 2));
    }
  }
  return Keep(std::move(d));
}

chat::ChatDelta ChatReply::Keep(chat::ChatDelta d) {
  if (!session_->request.include_reasoning) d.reasoning.clear();
  if (!session_->request.parallel_tool_calls) {
    std::vector<chat::ToolCallDelta> first;
    for (auto& t : d.tool_calls) {
      if (t.index == 0) {
        first.push_back(std::move(t));
      } else if (!dropped_calls_) {
        dropped_calls_ = true;
        ctx_->Log(LogLevel::kDebug, "tool_calls_dropped",
                  absl::StrCat("\"id\":\"", request_id_, "\",\"reason\":\"parallel_tool_calls is false\""));
      }
    }
    d.tool_calls = std::move(first);
  }
  made_calls_ = made_calls_ || !d.tool_calls.empty();
  return d;
}

}  // namespace ls::server
