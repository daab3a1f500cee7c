// The GLM-4.5 tool-call format: each call between <tool_call> and </tool_call>, the function's
// name on the first line, then its arguments as <arg_key>KEY</arg_key><arg_value>VALUE</arg_value>
// pairs (whitespace between them ignored). GLM's template writes a string value as its bare text
// and any other value as JSON, so a value that reads as JSON is taken as that JSON and anything
// else as a string — the one reading the text allows without the tool's schema.
#include <set>

#include "absl/strings/str_cat.h"
#include "chat/tool_call_format.h"
#include "nlohmann/json.hpp"
#include "structured/json_schema.h"

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
  // A key or bare value is the model's text, which may hold bytes that are not UTF-8: they become
  // U+FFFD, so that the arguments are JSON whatever was written (dump would throw).
  call.arguments = args.dump(-1, ' ', false, ojson::error_handler_t::replace);
  return call;
}

std::string GlmPrefix(const std::string& function, int /*call_index*/) {
  if (function.empty()) return "<tool_call>";
  return absl::StrCat("<tool_call>", function, "\n");
}

// A value as GLM writes it: a string property's bare text, anything else its JSON.
absl::StatusOr<structured::Symbol> GlmValue(structured::GrammarBuilder& b, const MarkerSpelling& spell,
                                            const ToolSpec& tool, const std::string& key, const ojson& schema) {
  if (schema.is_object() && schema.value("type", ojson()) == "string" && !schema.contains("enum") &&
      !schema.contains("pattern") && !schema.contains("format")) {
    if (!schema.contains("minLength") && !schema.contains("maxLength"))
      return b.TextWithout(spell(kValueEnd), "string-value");
    // Bounded: that many characters, none a '<' (which would begin the end marker).
    structured::ByteSet ascii;
    for (int c = 0x20; c < 0x80; ++c) ascii.set(c);
    ascii.set('\n');
    ascii.reset('<');
    const ojson lo = schema.value("minLength", ojson(0)), hi = schema.value("maxLength", ojson(-1));
    if (!lo.is_number_integer() || !hi.is_number_integer())
      return absl::InvalidArgumentError(absl::StrCat("'", key, "': minLength and maxLength must be integers"));
    return b.Repeat({b.Utf8Char(ascii, "value-char")}, lo.get<int64_t>(), hi.get<int64_t>(), "string-value");
  }
  auto v = structured::AddJsonSchema(b, schema, key, structured::JsonWhitespace::kCompact);
  if (v.ok() || tool.strict) return v;
  return structured::AddJsonSchema(b, ojson(true), key, structured::JsonWhitespace::kCompact);
}

// <tool_call>NAME\n then <arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n per argument (the
// schema's properties in order, the required ones always), then </tool_call>.
absl::StatusOr<std::vector<structured::Symbol>> GlmCall(structured::GrammarBuilder& b, const MarkerSpelling& spell,
                                                        const ToolSpec& tool) {
  if (tool.strict) {  // the schema as a whole must be one the compiler follows
    auto whole = ArgumentsRule(b, tool);
    if (!whole.ok()) return whole.status();
  }
  std::vector<structured::Symbol> s = Marker(b, spell, "<tool_call>");
  for (const auto& x : b.Literal(tool.name + "\n")) s.push_back(x);
  const auto pair = [&](std::vector<structured::Symbol> key, structured::Symbol value) {
    std::vector<structured::Symbol> p = Marker(b, spell, kKeyBegin);
    p.insert(p.end(), key.begin(), key.end());
    for (const auto& x : Marker(b, spell, kKeyEnd)) p.push_back(x);
    p.push_back(b.Byte('\n'));
    for (const auto& x : Marker(b, spell, kValueBegin)) p.push_back(x);
    p.push_back(value);
    for (const auto& x : Marker(b, spell, kValueEnd)) p.push_back(x);
    p.push_back(b.Byte('\n'));
    return p;
  };
  const ojson& params = tool.parameters;
  if (params.contains("properties") && params["properties"].is_object() && !params["properties"].empty()) {
    std::set<std::string> required;
    if (params.contains("required") && params["required"].is_array())
      for (const ojson& r : params["required"])
        if (r.is_string()) required.insert(r.get<std::string>());
    for (auto it = params["properties"].begin(); it != params["properties"].end(); ++it) {
      auto value = GlmValue(b, spell, tool, it.key(), it.value());
      if (!value.ok())
        return absl::InvalidArgumentError(absl::StrCat("tool '", tool.name, "' (strict): ", value.status().message()));
      const auto p = pair(b.Literal(it.key()), *value);
      s.push_back(required.count(it.key()) ? b.OneOf({p}, "argument") : b.Repeat(p, 0, 1, "argument?"));
    }
  } else {  // no declared arguments: any keys, values as text
    const auto p = pair({b.TextWithout(spell(kKeyEnd), "key")}, b.TextWithout(spell(kValueEnd), "value"));
    s.push_back(b.Repeat(p, 0, -1, "arguments"));
  }
  for (const auto& x : Marker(b, spell, "</tool_call>")) s.push_back(x);
  return s;
}

}  // namespace

const ToolCallFormat& Glm45ToolCallFormat() {
  static const ToolCallFormat* const kFormat =
      new ToolCallFormat{"glm45", {"", "", "<tool_call>", "</tool_call>", ParseGlmCall}, GlmPrefix, GlmCall};
  return *kFormat;
}

}  // namespace ls::chat
