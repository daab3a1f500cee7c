// ChatDelta::Append.
#include "chat/chat_output_parser.h"

namespace ls::chat {

void ChatDelta::Append(ChatDelta next) {
  reasoning += next.reasoning;
  content += next.content;
  for (ToolCallDelta& d : next.tool_calls) {
    if (!tool_calls.empty() && tool_calls.back().index == d.index) {
      ToolCallDelta& last = tool_calls.back();
      if (last.id.empty()) last.id = std::move(d.id);
      if (last.name.empty()) last.name = std::move(d.name);
      last.arguments += d.arguments;
    } else {
      tool_calls.push_back(std::move(d));
    }
  }
}

}  // namespace ls::chat
