// The DeepSeek-V3 tool-call format: a section <｜tool▁calls▁begin｜> ... <｜tool▁calls▁end｜> of
// calls <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGUMENTS\n```<｜tool▁call▁end｜>,
// after the content. DeepSeek-V3.1's shorter call, NAME<｜tool▁sep｜>ARGUMENTS, reads too.
#include "absl/strings/str_cat.h"
#include "chat/tool_call_format.h"

namespace ls::chat {
namespace {

constexpr std::string_view kSep = "<｜tool▁sep｜>";

std::optional<ParsedToolCall> ParseDeepSeekCall(std::string_view body, std::string* why) {
  const size_t sep = body.find(kSep);
  if (sep == std::string_view::npos) {
    *why = "the call has no <｜tool▁sep｜>";
    return std::nullopt;
  }
  const std::string_view head = TrimSpace(body.substr(0, sep));
  std::string_view rest = body.substr(sep + kSep.size());
  ParsedToolCall call;
  std::string_view args;
  if (head == "function") {  // V3: the name on its own line, then the arguments fenced as JSON
    const size_t eol = rest.find('\n');
    call.name = std::string(TrimSpace(rest.substr(0, eol)));
    args = eol == std::string_view::npos ? std::string_view() : TrimSpace(rest.substr(eol + 1));
    constexpr std::string_view kOpen = "```json", kClose = "```";
    if (args.substr(0, kOpen.size()) != kOpen || args.size() < kOpen.size() + kClose.size() ||
        args.substr(args.size() - kClose.size()) != kClose) {
      *why = absl::StrCat("the arguments of '", call.name, "' are not fenced as ```json");
      return std::nullopt;
    }
    args = args.substr(kOpen.size(), args.size() - kOpen.size() - kClose.size());
  } else {  // V3.1: NAME<｜tool▁sep｜>ARGUMENTS
    call.name = std::string(head);
    args = rest;
  }
  if (!IsCallName(call.name)) {
    *why = "the call has no function name";
    return std::nullopt;
  }
  std::optional<std::string> text = ArgumentsJson(args);
  if (!text) {
    *why = absl::StrCat("the arguments of '", call.name, "' are not a JSON object");
    return std::nullopt;
  }
  call.arguments = std::move(*text);
  return call;
}

std::string DeepSeekPrefix(const std::string& function, int /*call_index*/) {
  std::string p = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>";
  if (!function.empty()) absl::StrAppend(&p, function, "\n```json\n");
  return p;
}

// <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGUMENTS\n```<｜tool▁call▁end｜>.
absl::StatusOr<std::vector<structured::Symbol>> DeepSeekCall(structured::GrammarBuilder& b, const MarkerSpelling& spell,
                                                             const ToolSpec& tool) {
  auto args = ArgumentsRule(b, tool);
  if (!args.ok()) return args.status();
  std::vector<structured::Symbol> s = Marker(b, spell, "<｜tool▁call▁begin｜>");
  for (const auto& x : b.Literal("function")) s.push_back(x);
  for (const auto& x : Marker(b, spell, kSep)) s.push_back(x);
  for (const auto& x : b.Literal(absl::StrCat(tool.name, "\n```json\n"))) s.push_back(x);
  s.push_back(*args);
  for (const auto& x : b.Literal("\n```")) s.push_back(x);
  for (const auto& x : Marker(b, spell, "<｜tool▁call▁end｜>")) s.push_back(x);
  return s;
}

}  // namespace

const ToolCallFormat& DeepSeekV3ToolCallFormat() {
  static const ToolCallFormat* const kFormat =
      new ToolCallFormat{"deepseek_v3",
                         {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                          "<｜tool▁call▁end｜>", ParseDeepSeekCall},
                         DeepSeekPrefix, DeepSeekCall};
  return *kFormat;
}

}  // namespace ls::chat
