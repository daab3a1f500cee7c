// XTML headers, attribute escaping and the format's JSON spellings.
#include "chat/xtml_syntax.h"

#include <algorithm>

namespace ls::chat::xtml {
namespace {

using ojson = nlohmann::ordered_json;

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && IsJsonSpace(s[i])) ++i;
  return i;
}

// End (exclusive) of the JSON string literal starting at s[i] == '"', or npos.
size_t ScanString(std::string_view s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// End (exclusive) of the JSON value that starts at s[i], found by its brackets and quotes only;
// the caller validates the text. npos when it runs off the end.
size_t ScanValue(std::string_view s, size_t i) {
  if (i >= s.size()) return std::string_view::npos;
  if (s[i] == '"') return ScanString(s, i);
  if (s[i] == '{' || s[i] == '[') {
    int depth = 0;
    for (; i < s.size(); ++i) {
      const char c = s[i];
      if (c == '"') {
        i = ScanString(s, i);
        if (i == std::string_view::npos) return i;
        --i;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return i + 1;
      }
    }
    return std::string_view::npos;
  }
  const size_t start = i;
  while (i < s.size() && !IsJsonSpace(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ':' &&
         s[i] != '{' && s[i] != '[' && s[i] != '"')
    ++i;
  return i == start ? std::string_view::npos : i;
}

// Parses `text` as one JSON value; nullopt when it is not one.
std::optional<ojson> ParseJson(std::string_view text) {
  ojson v = ojson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return std::nullopt;
  return v;
}

// The string-argument reading of SplitToolArguments; nullopt when `s` is not a JSON object.
std::optional<std::vector<ToolArgument>> SplitObjectText(std::string_view s) {
  std::vector<ToolArgument> out;
  size_t i = SkipSpace(s, 0);
  if (i >= s.size() || s[i] != '{') return std::nullopt;
  i = SkipSpace(s, i + 1);
  if (i >= s.size()) return std::nullopt;
  if (s[i] == '}') return out;
  while (true) {
    if (i >= s.size() || s[i] != '"') return std::nullopt;
    const size_t key_end = ScanString(s, i);
    if (key_end == std::string_view::npos) return std::nullopt;
    auto key = ParseJson(s.substr(i, key_end - i));
    if (!key || !key->is_string()) return std::nullopt;
    i = SkipSpace(s, key_end);
    if (i >= s.size() || s[i] != ':') return std::nullopt;
    i = SkipSpace(s, i + 1);
    const size_t value_end = ScanValue(s, i);
    if (value_end == std::string_view::npos) return std::nullopt;
    const std::string_view literal = s.substr(i, value_end - i);
    auto value = ParseJson(literal);
    if (!value) return std::nullopt;
    ToolArgument arg{key->get<std::string>(), std::string(JsonTypeName(*value)), ""};
    arg.text = value->is_string() ? value->get<std::string>() : std::string(literal);
    out.push_back(std::move(arg));
    i = SkipSpace(s, value_end);
    if (i >= s.size()) return std::nullopt;
    const char terminator = s[i];
    i = SkipSpace(s, i + 1);
    if (terminator == '}') break;
    if (terminator != ',') return std::nullopt;
  }
  return out;
}

void AppendCompactSorted(const ojson& v, std::string* out) {
  if (v.is_object()) {
    std::vector<std::string_view> keys;
    for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
    std::sort(keys.begin(), keys.end());
    out->push_back('{');
    for (size_t k = 0; k < keys.size(); ++k) {
      if (k > 0) out->push_back(',');
      out->append(JsonQuote(keys[k]));
      out->push_back(':');
      AppendCompactSorted(v.at(std::string(keys[k])), out);
    }
    out->push_back('}');
  } else if (v.is_array()) {
    out->push_back('[');
    for (size_t k = 0; k < v.size(); ++k) {
      if (k > 0) out->push_back(',');
      AppendCompactSorted(v[k], out);
    }
    out->push_back(']');
  } else {
    out->append(v.dump(-1, ' ', false, ojson::error_handler_t::replace));
  }
}

}  // namespace

std::string EscapeAttr(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '"') {
      out += "&quot;";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string UnescapeAttr(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size();) {
    if (value.substr(i, 6) == "&quot;") {
      out.push_back('"');
      i += 6;
    } else if (value.substr(i, 5) == "&amp;") {
      out.push_back('&');
      i += 5;
    } else {
      out.push_back(value[i++]);
    }
  }
  return out;
}

const std::string* Header::Find(std::string_view key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

std::optional<Header> ParseHeader(std::string_view text) {
  Header h;
  size_t i = 0;
  while (i < text.size() && text[i] != ' ') ++i;
  h.name = std::string(text.substr(0, i));
  if (h.name.empty() || h.name.find_first_of("\"=") != std::string::npos) return std::nullopt;
  while (i < text.size()) {
    if (text[i] != ' ') return std::nullopt;  // attributes are separated by spaces
    while (i < text.size() && text[i] == ' ') ++i;
    if (i == text.size()) break;
    const size_t key_start = i;
    while (i < text.size() && text[i] != '=' && text[i] != ' ' && text[i] != '"') ++i;
    if (i == key_start || text.substr(i, 2) != "=\"") return std::nullopt;
    std::string key(text.substr(key_start, i - key_start));
    i += 2;
    const size_t value_end = text.find('"', i);
    if (value_end == std::string_view::npos) return std::nullopt;
    h.attrs.emplace_back(std::move(key), UnescapeAttr(text.substr(i, value_end - i)));
    i = value_end + 1;
  }
  return h;
}

std::string_view JsonTypeName(const nlohmann::ordered_json& value) {
  if (value.is_string()) return "string";
  if (value.is_boolean()) return "boolean";
  if (value.is_null()) return "null";
  if (value.is_number()) return "number";
  if (value.is_object()) return "object";
  return "array";
}

std::string PythonJson(const nlohmann::ordered_json& value) {
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!first) out += ", ";
      first = false;
      out += JsonQuote(it.key());
      out += ": ";
      out += PythonJson(it.value());
    }
    return out + "}";
  }
  if (value.is_array()) {
    std::string out = "[";
    for (size_t k = 0; k < value.size(); ++k) {
      if (k > 0) out += ", ";
      out += PythonJson(value[k]);
    }
    return out + "]";
  }
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string CompactSortedJson(const nlohmann::ordered_json& value) {
  std::string out;
  AppendCompactSorted(value, &out);
  return out;
}

std::string JsonQuote(std::string_view text) {
  return nlohmann::ordered_json(std::string(text))
      .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

ToolArguments SplitToolArguments(const nlohmann::ordered_json& arguments) {
  ToolArguments out;
  if (arguments.is_null()) return out;
  if (arguments.is_string()) {
    const std::string& s = arguments.get_ref<const std::string&>();
    if (s.empty()) return out;
    if (auto entries = SplitObjectText(s)) {
      out.entries = std::move(*entries);
    } else {
      out.raw_json = s;
    }
    return out;
  }
  if (arguments.is_object()) {
    for (auto it = arguments.begin(); it != arguments.end(); ++it) {
      const auto& v = it.value();
      out.entries.push_back(
          {it.key(), std::string(JsonTypeName(v)), v.is_string() ? v.get<std::string>() : PythonJson(v)});
    }
    return out;
  }
  out.raw_json = PythonJson(arguments);
  return out;
}

}  // namespace ls::chat::xtml
