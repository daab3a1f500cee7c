// The Hermes tool-call format, as Qwen2/Qwen3 and NousResearch's Hermes models write it: each call
// a JSON object {"name": ..., "arguments": {...}} between <tool_call> and </tool_call>, calls one
// after another, content before them.
#include "absl/strings/str_cat.h"
#include "chat/tool_call_format.h"
#include "nlohmann/json.hpp"

namespace ls::chat {
namespace {

using ojson = nlohmann::ordered_json;

std::optional<ParsedToolCall> ParseHermesCall(std::string_view body, std::string* why) {
  const ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    *why = "the text between <tool_call> and </tool_call> is not a JSON object";
    return std::nullopt;
  }
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || !IsCallName(name->get<std::string>())) {
    *why = "the call has no function name";
    return std::nullopt;
  }
  ParsedToolCall call;
  call.name = name->get<std::string>();
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");  // as some Hermes-style models name them
  std::optional<std::string> text = args == j.end() ? std::string("{}") : ArgumentsJson(args->dump());
  if (!text) {
    *why = absl::StrCat("the arguments of '", call.name, "' are not a JSON object");
    return std::nullopt;
  }
  call.arguments = std::move(*text);
  return call;
}

std::string HermesPrefix(const std::string& function, int /*call_index*/) {
  if (function.empty()) return "<tool_call>\n{\"name\": \"";
  return absl::StrCat("<tool_call>\n{\"name\": ", ojson(function).dump(), ", \"arguments\": ");
}

// <tool_call>\n{"name": NAME, "arguments": ARGUMENTS}\n</tool_call>, as HermesPrefix begins it.
absl::StatusOr<std::vector<structured::Symbol>> HermesCall(structured::GrammarBuilder& b, const MarkerSpelling& spell,
                                                           const ToolSpec& tool) {
  auto args = ArgumentsRule(b, tool);
  if (!args.ok()) return args.status();
  std::vector<structured::Symbol> s = Marker(b, spell, "<tool_call>");
  for (const auto& x : b.Literal(absl::StrCat("\n{\"name\": ", ojson(tool.name).dump(), ", \"arguments\": "))) s.push_back(x);
  s.push_back(*args);
  for (const auto& x : b.Literal("}\n")) s.push_back(x);
  for (const auto& x : Marker(b, spell, "</tool_call>")) s.push_back(x);
  return s;
}

}  // namespace

const ToolCallFormat& HermesToolCallFormat() {
  static const ToolCallFormat* const kFormat =
      new ToolCallFormat{"hermes", {"", "", "<tool_call>", "</tool_call>", ParseHermesCall}, HermesPrefix, HermesCall};
  return *kFormat;
}

}  // namespace ls::chat
