// The GLM-4.5 tool-call format: each call between <tool_call> and </tool_call>, the function's
// name on the first line, then its arguments as <arg_key>KEY</arg_key><arg_value>VALUE</arg_value>
// pairs (whitespace between them ignored). GLM's template writes a string value as its bare text
// and any other value as JSON, so a value that reads as JSON is taken as that JSON and anything
// else as a string — the one reading the text allows without the tool's schema.
#include "absl/strings/str_cat.h"
#include "engine/chat/tool_call_format.h"
#include "nlohmann/json.hpp"

namespace ls::chat {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kKeyBegin = "<arg_key>", kKeyEnd = "</arg_key>";
constexpr std::string_view kValueBegin = "<arg_value>", kValueEnd = "</arg_value>";

// The text between `begin` and `end` at the start of *rest (after whitespace); advances *rest.
std::optional<std::string_view> Element(std::string_view* rest, std::string_view begin, std::string_view end) {
  const std::string_view r = TrimSpace(*rest);
  if (r.substr(0, begin.size()) != begin) return std::nullopt;
  const size_t close = r.find(end, begin.size());
  if (close == std::string_view::npos) return std::nullopt;
  *rest = r.substr(close + end.size());
  return r.substr(begin.size(), close - begin.size());
}

std::optional<ParsedToolCall> ParseGlmCall(std::string_view body, std::string* why) {
  const size_t first = body.find(kKeyBegin);
  ParsedToolCall call;
  call.name = std::string(TrimSpace(body.substr(0, first)));
  if (!IsCallName(call.name)) {
    *why = "the call has no function name before its arguments";
    return std::nullopt;
  }
  std::string_view rest = first == std::string_view::npos ? std::string_view() : body.substr(first);
  ojson args = ojson::object();
  while (!TrimSpace(rest).empty()) {
    std::optional<std::string_view> key = Element(&rest, kKeyBegin, kKeyEnd);
    std::optional<std::string_view> value = key ? Element(&rest, kValueBegin, kValueEnd) : std::nullopt;
    if (!value) {
      *why = absl::StrCat("the arguments of '", call.name, "' are not <arg_key>/<arg_value> pairs");
      return std::nullopt;
    }
    ojson v = ojson::parse(*value, nullptr, /*allow_exceptions=*/false);
    args[std::string(*key)] = v.is_discarded() ? ojson(std::string(*value)) : std::move(v);
  }
  call.arguments = args.dump();
  return call;
}

std::string GlmPrefix(const std::string& function, int /*call_index*/) {
  if (function.empty()) return "<tool_call>";
  return absl::StrCat("<tool_call>", function, "\n");
}

}  // namespace

const ToolCallFormat& Glm45ToolCallFormat() {
  static const ToolCallFormat* const kFormat =
      new ToolCallFormat{"glm45", {"", "", "<tool_call>", "</tool_call>", ParseGlmCall}, GlmPrefix};
  return *kFormat;
}

}  // namespace ls::chat
