// JSON in and out of the interpreter's values: JSON data (messages, tools, kwargs) becomes values
// with key order kept, and values print as Python's json.dumps prints them (the tojson filter).
#pragma once

#include <optional>
#include <string>

#include "jinja/value.h"
#include "nlohmann/json.hpp"

namespace ls::jinja {

// Fails (TemplateError) on nesting deeper than max_depth.
Value FromJson(const nlohmann::ordered_json& j, int max_depth);

// json.dumps(x, ensure_ascii, indent, separators, sort_keys) with Python's defaults for separators:
// (', ', ': ') without indent, (',', ': ') with it.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // the indent string (an int n is n spaces)
  std::string invalid_indent;         // an indent of another type: json.dumps fails unless given a str
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
};
void DumpJson(const Value& v, const JsonDumpOptions& options, std::string* out, Budget& budget);

}  // namespace ls::jinja
