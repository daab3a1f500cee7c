// XTML syntax shared by Kimi K3's chat renderer and output parser: the four control ids, tag
// headers (`NAME k="v" ...`) with their attribute escaping, and the JSON spellings the format
// uses (Python json.dumps styles, argument types). Pure functions over strings; no state.
//
// A tag is <|open|>HEADER<|sep|>BODY<|close|>NAME<|sep|>, where <|open|>, <|close|> and <|sep|>
// are control ids and HEADER is text: the tag name, then ` key="value"` per attribute. Attribute
// values escape `&` as `&amp;` and then `"` as `&quot;`, so a value never holds a raw quote.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace ls::chat::xtml {

// The control ids XTML is built from, as one tokenizer numbers them (K3: 163587, 163588, 163589,
// 163586; the tiny test vocabulary: 6003, 6004, 6005, 6002).
struct ControlIds {
  int32_t open = -1;
  int32_t close = -1;
  int32_t sep = -1;
  int32_t end_of_msg = -1;
  bool IsControl(int32_t id) const { return id == open || id == close || id == sep || id == end_of_msg; }
};

inline constexpr std::string_view kOpenToken = "<|open|>";
inline constexpr std::string_view kCloseToken = "<|close|>";
inline constexpr std::string_view kSepToken = "<|sep|>";
inline constexpr std::string_view kEndOfMsgToken = "<|end_of_msg|>";

// Tag names.
inline constexpr std::string_view kMessage = "message";
inline constexpr std::string_view kThink = "think";
inline constexpr std::string_view kResponse = "response";
inline constexpr std::string_view kTools = "tools";
inline constexpr std::string_view kCall = "call";
inline constexpr std::string_view kArgument = "argument";
inline constexpr std::string_view kJson = "json";

// `&` -> `&amp;`, then `"` -> `&quot;`.
std::string EscapeAttr(std::string_view value);
// The inverse, in one left-to-right pass (so `&amp;quot;` reads back as `&quot;`); any other `&`
// is kept as written.
std::string UnescapeAttr(std::string_view value);

// A parsed tag header.
struct Header {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  // unescaped values, in order
  // The value of attribute `key` (the first one), or nullptr.
  const std::string* Find(std::string_view key) const;
};

// Reads `NAME( KEY="VALUE")*` (spaces between attributes, and trailing ones, are tolerated);
// nullopt when the text has another shape (empty name, a stray quote, an unterminated value).
std::optional<Header> ParseHeader(std::string_view text);

// The XTML `type` of a JSON value: string, number, boolean, null, object or array.
std::string_view JsonTypeName(const nlohmann::ordered_json& value);

// json.dumps(value, ensure_ascii=False): ", " and ": " separators, keys in the value's order.
std::string PythonJson(const nlohmann::ordered_json& value);
// json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True): keys sorted by
// code point at every depth.
std::string CompactSortedJson(const nlohmann::ordered_json& value);
// A JSON string literal of `text` (valid UTF-8 expected; invalid bytes become U+FFFD).
std::string JsonQuote(std::string_view text);

// One argument of a tool call as XTML writes it: `type` is the JSON type of the value, `text` the
// raw string for a string value, else the value's JSON text.
struct ToolArgument {
  std::string key;
  std::string type;
  std::string text;
};

// A call's arguments in XTML: one `argument` tag per top-level key, or, when the arguments given
// are not a JSON object, a single `json type="object"` tag holding them as given.
struct ToolArguments {
  std::vector<ToolArgument> entries;
  std::optional<std::string> raw_json;
};

// Arguments as an OpenAI request carries them. A string is read one level deep as K3's reference
// encoder reads it: each non-string value keeps its JSON literal exactly as written (`1e2` stays
// `1e2`, `[1, 2]` keeps its spacing), string values are unescaped, text after the closing brace
// is ignored, and anything that is not a JSON object becomes `raw_json`. An object gives one
// entry per key, non-string values written by PythonJson. Null or "" give no arguments.
ToolArguments SplitToolArguments(const nlohmann::ordered_json& arguments);

}  // namespace ls::chat::xtml
