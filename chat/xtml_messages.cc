// Reading chat messages for the XTML renderer, and matching tool results to their calls.
#include "chat/xtml_messages.h"

#include <algorithm>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ls::chat::xtml {
namespace {

using ojson = nlohmann::ordered_json;

absl::Status Bad(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// An optional string field: absent or null give "".
absl::Status ReadString(const ojson& m, const char* key, const std::string& where, std::string* out) {
  auto it = m.find(key);
  if (it == m.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return Bad(absl::StrCat(where, ".", key), "must be a string");
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadToolCalls(const ojson& m, const std::string& where, std::vector<XtmlToolCall>* out) {
  auto it = m.find("tool_calls");
  if (it == m.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return Bad(where + ".tool_calls", "must be a list");
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string at = absl::StrCat(where, ".tool_calls[", i, "]");
    const ojson& call = (*it)[i];
    if (!call.is_object()) return Bad(at, "must be an object");
    XtmlToolCall c;
    if (auto s = ReadString(call, "id", at, &c.id); !s.ok()) return s;
    auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object()) return Bad(at + ".function", "must be an object");
    if (auto s = ReadString(*fn, "name", at + ".function", &c.name); !s.ok()) return s;
    if (c.name.empty()) return Bad(at + ".function.name", "must be a non-empty string");
    auto args = fn->find("arguments");
    c.arguments = SplitToolArguments(args == fn->end() ? ojson() : *args);
    out->push_back(std::move(c));
  }
  return absl::OkStatus();
}

absl::StatusOr<XtmlMessage> ReadMessage(const ojson& m, size_t index) {
  const std::string where = absl::StrCat("messages[", index, "]");
  if (!m.is_object()) return Bad(where, "must be an object");
  XtmlMessage out;
  out.source = index;
  auto role = m.find("role");
  if (role == m.end() || !role->is_string()) return Bad(where + ".role", "must be a string");
  out.role = role->get<std::string>();
  if (out.role == "developer") out.role = "system";
  if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "tool")
    return Bad(where + ".role", absl::StrCat("'", role->get<std::string>(),
                                             "' is not supported (system, developer, user, assistant, tool)"));
  if (auto s = ReadString(m, "name", where, &out.name); !s.ok()) return s;
  auto content = m.find("content");
  auto parts = ReadTextParts(content == m.end() ? ojson() : *content, where + ".content");
  if (!parts.ok()) return parts.status();
  out.parts = std::move(*parts);
  if (out.role == "assistant") {
    if (auto s = ReadString(m, "reasoning_content", where, &out.reasoning); !s.ok()) return s;
    if (out.reasoning.empty())
      if (auto s = ReadString(m, "reasoning", where, &out.reasoning); !s.ok()) return s;
    if (auto s = ReadToolCalls(m, where, &out.calls); !s.ok()) return s;
  } else if (out.role == "tool") {
    if (auto s = ReadString(m, "tool_call_id", where, &out.tool_call_id); !s.ok()) return s;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadTextParts(const ojson& content, const std::string& where) {
  std::vector<std::string> parts;
  if (content.is_null()) return parts;
  if (content.is_string()) {
    parts.push_back(content.get<std::string>());
    return parts;
  }
  if (!content.is_array()) return Bad(where, "must be a string, null or a list of content parts");
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string at = absl::StrCat(where, "[", i, "]");
    const ojson& part = content[i];
    if (!part.is_object()) return Bad(at, "must be an object");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) return Bad(at + ".type", "must be a string");
    if (*type != "text")
      return Bad(at, absl::StrCat("content part type '", type->get<std::string>(), "' is not supported (text only)"));
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) return Bad(at + ".text", "must be a string");
    parts.push_back(text->get<std::string>());
  }
  return parts;
}

absl::StatusOr<std::vector<XtmlMessage>> ReadXtmlMessages(const ojson& messages) {
  if (!messages.is_array()) return absl::InvalidArgumentError("messages must be a list");
  std::vector<XtmlMessage> read;
  read.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    auto m = ReadMessage(messages[i], i);
    if (!m.ok()) return m.status();
    read.push_back(std::move(*m));
  }

  std::vector<XtmlMessage> out;
  out.reserve(read.size());
  size_t assistant_at = read.size();  // the last assistant message so far, in `out`
  int counter = 0;                    // tool results since it
  size_t i = 0;
  while (i < read.size()) {
    if (read[i].role != "tool") {
      if (read[i].role == "assistant") {
        counter = 0;
        assistant_at = out.size();
      }
      out.push_back(std::move(read[i]));
      ++i;
      continue;
    }
    // The calls this run can answer: names by position, and tool_call_id -> position (first wins).
    std::vector<std::string> call_names;
    std::map<std::string, size_t> position_of;
    if (assistant_at < out.size()) {
      for (const XtmlToolCall& call : out[assistant_at].calls) {
        if (!call.id.empty()) position_of.emplace(call.id, call_names.size());
        call_names.push_back(call.name);
      }
    }
    size_t end = i;
    while (end < read.size() && read[end].role == "tool") ++end;
    std::vector<std::pair<size_t, size_t>> matched;  // (call position, message index)
    for (size_t k = i; k < end; ++k) {
      auto it = position_of.find(read[k].tool_call_id);
      if (read[k].tool_call_id.empty() || it == position_of.end()) break;
      matched.emplace_back(it->second, k);
    }
    if (matched.size() == end - i) {
      std::stable_sort(matched.begin(), matched.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& [position, k] : matched) {
        XtmlMessage m = std::move(read[k]);
        m.tool = call_names[position];
        m.tool_index = static_cast<int>(position) + 1;
        ++counter;
        out.push_back(std::move(m));
      }
    } else {
      for (size_t k = i; k < end; ++k) {
        XtmlMessage m = std::move(read[k]);
        m.tool_index = ++counter;
        auto it = position_of.find(m.tool_call_id);
        if (!m.name.empty()) {
          m.tool = m.name;
        } else if (!m.tool_call_id.empty() && it != position_of.end()) {
          m.tool = call_names[it->second];
        } else if (counter <= static_cast<int>(call_names.size())) {
          m.tool = call_names[counter - 1];
        } else {
          return Bad(absl::StrCat("messages[", m.source, "]"),
                     "a tool result needs a tool name: a tool_call_id naming a call of the assistant message "
                     "before it, a `name`, or a matching call at its position");
        }
        out.push_back(std::move(m));
      }
    }
    i = end;
  }
  return out;
}

}  // namespace ls::chat::xtml
