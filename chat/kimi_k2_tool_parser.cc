// The Kimi-K2 tool-call format: a section <|tool_calls_section_begin|> ... <|tool_calls_section_end|>
// of calls <|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>ARGUMENTS<|tool_call_end|>,
// after the content. The call's id is what the model wrote before the arguments
// ("functions.get_weather:0"); the name is its part between the last '.' and the ':'.
#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "chat/tool_call_format.h"

namespace ls::chat {
namespace {

constexpr std::string_view kArgs = "<|tool_call_argument_begin|>";

std::optional<ParsedToolCall> ParseKimiCall(std::string_view body, std::string* why) {
  const size_t at = body.find(kArgs);
  if (at == std::string_view::npos) {
    *why = "the call has no <|tool_call_argument_begin|>";
    return std::nullopt;
  }
  const std::string_view id = TrimSpace(body.substr(0, at));
  const size_t colon = id.rfind(':');
  const std::string_view index = colon == std::string_view::npos ? std::string_view() : id.substr(colon + 1);
  if (colon == std::string_view::npos || index.empty() ||
      !std::all_of(index.begin(), index.end(), [](char c) { return absl::ascii_isdigit(c); })) {
    *why = absl::StrCat("the call id '", std::string(id), "' is not NAME:INDEX");
    return std::nullopt;
  }
  std::string_view name = id.substr(0, colon);
  if (const size_t dot = name.rfind('.'); dot != std::string_view::npos) name.remove_prefix(dot + 1);
  ParsedToolCall call;
  call.name = std::string(name);
  call.id = std::string(id);
  if (!IsCallName(call.name)) {
    *why = absl::StrCat("the call id '", std::string(id), "' names no function");
    return std::nullopt;
  }
  std::optional<std::string> text = ArgumentsJson(body.substr(at + kArgs.size()));
  if (!text) {
    *why = absl::StrCat("the arguments of '", call.name, "' are not a JSON object");
    return std::nullopt;
  }
  call.arguments = std::move(*text);
  return call;
}

std::string KimiPrefix(const std::string& function, int call_index) {
  std::string p = "<|tool_calls_section_begin|><|tool_call_begin|>functions.";
  if (!function.empty()) absl::StrAppend(&p, function, ":", call_index, std::string(kArgs));
  return p;
}

// <|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>ARGUMENTS<|tool_call_end|>.
absl::StatusOr<std::vector<structured::Symbol>> KimiCall(structured::GrammarBuilder& b, const MarkerSpelling& spell,
                                                         const ToolSpec& tool) {
  auto args = ArgumentsRule(b, tool);
  if (!args.ok()) return args.status();
  std::vector<structured::Symbol> s = Marker(b, spell, "<|tool_call_begin|>");
  for (const auto& x : b.Literal(absl::StrCat("functions.", tool.name, ":"))) s.push_back(x);
  structured::ByteSet digits;
  for (char c = '0'; c <= '9'; ++c) digits.set(static_cast<uint8_t>(c));
  s.push_back(b.Repeat({b.Bytes(digits)}, 1, 4, "call-index"));
  for (const auto& x : Marker(b, spell, kArgs)) s.push_back(x);
  s.push_back(*args);
  for (const auto& x : Marker(b, spell, "<|tool_call_end|>")) s.push_back(x);
  return s;
}

}  // namespace

const ToolCallFormat& KimiK2ToolCallFormat() {
  static const ToolCallFormat* const kFormat =
      new ToolCallFormat{"kimi_k2",
                         {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                          "<|tool_call_end|>", ParseKimiCall},
                         KimiPrefix, KimiCall};
  return *kFormat;
}

}  // namespace ls::chat
