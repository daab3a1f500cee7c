// StructuralTag: reading both forms, and the grammar of a format.
#include "structured/structural_tag.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "structured/ebnf.h"
#include "structured/json_schema.h"
#include "structured/regex.h"

namespace ls::structured {
namespace {

using ojson = nlohmann::ordered_json;

absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("structural tag: '", field, "' ", what));
}

// A string field of `j`.
absl::Status ReadString(const ojson& j, const char* key, const std::string& field, bool non_empty, std::string* out) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return Bad(field, "must be a string");
  *out = it->get<std::string>();
  if (non_empty && out->empty()) return Bad(field, "must not be empty");
  return absl::OkStatus();
}

// A JSON schema given as an object or a boolean, or as its JSON text.
absl::Status ReadSchema(const ojson& v, const std::string& field, ojson* out) {
  if (v.is_string()) {
    *out = ojson::parse(v.get<std::string>(), nullptr, false);
    if (out->is_discarded()) return Bad(field, "is not valid JSON");
  } else {
    *out = v;
  }
  if (!out->is_object() && !out->is_boolean()) return Bad(field, "must be a JSON schema");
  return absl::OkStatus();
}

// The grammar of a format, in `b`; markers spelled as the model's vocabulary writes them.
class FormatCompiler {
 public:
  FormatCompiler(GrammarBuilder& b, const StructuralTag& tag) : b_(b), tag_(tag), legacy_(tag.format.is_null()) {}

  absl::StatusOr<Symbol> Format(const ojson& f, const std::string& at, int depth) {
    if (depth > StructuralTag::kMaxDepth)
      return Bad(at, absl::StrCat("nests formats more than ", StructuralTag::kMaxDepth, " deep"));
    if (!f.is_object() || !f.contains("type") || !f["type"].is_string())
      return Bad(at, "must be a format: an object with a string 'type'");
    const std::string type = f["type"].get<std::string>();
    if (type == "const_string") {
      std::string value;
      if (auto st = ReadString(f, "value", at + ".value", false, &value); !st.ok()) return st;
      return Rule(b_.Literal(Spell(value)), "const-string");
    }
    if (type == "json_schema") {
      if (f.contains("style") && f["style"] != "json") return Bad(at + ".style", "is not supported (only \"json\")");
      if (!f.contains("json_schema")) return Bad(at + ".json_schema", "is required");
      ojson schema;
      if (auto st = ReadSchema(f["json_schema"], at + ".json_schema", &schema); !st.ok()) return st;
      auto s = AddJsonSchema(b_, schema, at);
      // (The first form names the schema by its place among the structures.)
      if (!s.ok()) return Bad(legacy_ ? at : at + ".json_schema", std::string(s.status().message()));
      return *s;
    }
    if (type == "grammar" || type == "regex") {
      const char* key = type == "grammar" ? "grammar" : "pattern";
      std::string text;
      if (auto st = ReadString(f, key, at + "." + key, true, &text); !st.ok()) return st;
      auto s = type == "grammar" ? AddEbnf(b_, text) : AddRegex(b_, text, RegexText::kRaw);
      if (!s.ok()) return Bad(at + "." + key, std::string(s.status().message()));
      return *s;
    }
    if (type == "any_text") return AnyText(f, at, {});
    if (type == "sequence" || type == "or") {
      const auto elements = f.find("elements");
      if (elements == f.end() || !elements->is_array() || elements->empty())
        return Bad(at + ".elements", "must be a non-empty list of formats");
      std::vector<Symbol> parts;
      for (size_t i = 0; i < elements->size(); ++i) {
        auto s = Format((*elements)[i], absl::StrCat(at, ".elements[", i, "]"), depth + 1);
        if (!s.ok()) return s.status();
        parts.push_back(*s);
      }
      if (type == "sequence") return Rule(parts, "sequence");
      std::vector<std::vector<Symbol>> alts;
      for (const Symbol& s : parts) alts.push_back({s});
      return b_.OneOf(alts, "or");
    }
    if (type == "tag") return Tag(f, at, depth);
    if (type == "triggered_tags") return TriggeredTags(f, at, depth);
    if (type == "tags_with_separator") return TagsWithSeparator(f, at, depth);
    return Bad(at + ".type", absl::StrCat("'", type,
                                          "' is not supported (const_string, json_schema, grammar, regex, any_text, "
                                          "sequence, or, tag, triggered_tags, tags_with_separator)"));
  }

 private:
  std::string Spell(const std::string& text) const {
    const std::string* longest = nullptr;
    for (const std::string& s : tag_.special)
      if (!s.empty() && absl::StartsWith(text, s) && (!longest || s.size() > longest->size())) longest = &s;
    if (!longest) return text;
    return SpecialToken(*longest) + text.substr(longest->size());
  }

  Symbol Rule(const std::vector<Symbol>& symbols, const std::string& name) { return b_.OneOf({symbols}, name); }

  // A list of non-empty strings, as written; absent it is none, unless `required` (then it must
  // hold one at least).
  absl::Status Strings(const ojson& f, const char* key, const std::string& at, bool required,
                       std::vector<std::string>* out) {
    const auto it = f.find(key);
    const bool absent = it == f.end() || it->is_null();
    if (absent && !required) return absl::OkStatus();
    if (absent || !it->is_array() || (required && it->empty()))
      return Bad(at + "." + key,
                 required ? "must be a non-empty list of non-empty strings" : "must be a list of non-empty strings");
    for (size_t i = 0; i < it->size(); ++i) {
      const ojson& s = (*it)[i];
      if (!s.is_string() || s.get<std::string>().empty())
        return Bad(absl::StrCat(at, ".", key, "[", i, "]"), "must be a non-empty string");
      out->push_back(s.get<std::string>());
    }
    return absl::OkStatus();
  }

  // Where tag i of a tag list at `at` is (the first form names its structures).
  std::string TagPlace(const std::string& at, size_t i) const {
    return legacy_ ? absl::StrCat("structures[", i, "]") : absl::StrCat(at, ".tags[", i, "]");
  }

  absl::Status Flag(const ojson& f, const char* key, const std::string& at, bool* out) {
    const auto it = f.find(key);
    if (it == f.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_boolean()) return Bad(at + "." + key, "must be true or false");
    *out = it->get<bool>();
    return absl::OkStatus();
  }

  // Free text holding none of `stops` (as written) nor the format's excluded_str.
  absl::StatusOr<Symbol> AnyText(const ojson& f, const std::string& at, std::vector<std::string> stops) {
    if (auto st = Strings(f, "excluded_str", at, false, &stops); !st.ok()) return st;
    for (std::string& s : stops) s = Spell(s);
    size_t bytes = 0;
    for (const std::string& s : stops) bytes += s.size();
    if (bytes > StructuralTag::kMaxTriggerBytes)
      return Bad(at, absl::StrCat("stops free text at ", bytes, " bytes of strings in all; at most ",
                                  StructuralTag::kMaxTriggerBytes));
    return b_.TextWithoutAny(stops, "any-text");
  }

  // begin, content, end; any_text content runs up to the end.
  absl::StatusOr<Symbol> Tag(const ojson& f, const std::string& at, int depth, std::string* begin_out = nullptr) {
    if (!f.is_object()) return Bad(at, "must be a tag: {begin, content, end}");
    if (f.contains("type") && f["type"] != "tag") return Bad(at + ".type", "must be \"tag\"");
    std::string begin, end;
    if (auto st = ReadString(f, "begin", at + ".begin", false, &begin); !st.ok()) return st;
    if (auto st = ReadString(f, "end", at + ".end", false, &end); !st.ok()) return st;
    if (begin_out) *begin_out = begin;
    const auto content = f.find("content");
    if (content == f.end()) return Bad(at + ".content", "is required (a format)");
    absl::StatusOr<Symbol> inner = absl::InternalError("");
    if (content->is_object() && content->value("type", "") == "any_text") {
      std::vector<std::string> stops;
      if (!end.empty()) stops.push_back(end);
      inner = AnyText(*content, at + ".content", std::move(stops));
    } else {
      inner = Format(*content, at + (legacy_ ? ".schema" : ".content"), depth + 1);
    }
    if (!inner.ok()) return inner.status();
    std::vector<Symbol> seq = b_.Literal(Spell(begin));
    seq.push_back(*inner);
    for (const Symbol& s : b_.Literal(Spell(end))) seq.push_back(s);
    return Rule(seq, "tag");
  }

  // The tags of `f`, as one alternative each; their begins in *begins.
  absl::StatusOr<Symbol> Tags(const ojson& f, const std::string& at, int depth, std::vector<std::string>* begins) {
    const auto tags = f.find("tags");
    if (tags == f.end() || !tags->is_array() || tags->empty())
      return Bad(at + ".tags", "must be a non-empty list of tags");
    std::vector<std::vector<Symbol>> alts;
    for (size_t i = 0; i < tags->size(); ++i) {
      std::string begin;
      auto t = Tag((*tags)[i], TagPlace(at, i), depth + 1, &begin);
      if (!t.ok()) return t.status();
      alts.push_back({*t});
      begins->push_back(begin);
    }
    return b_.OneOf(alts, "tags");
  }

  absl::StatusOr<Symbol> TriggeredTags(const ojson& f, const std::string& at, int depth) {
    std::vector<std::string> triggers;
    if (auto st = Strings(f, "triggers", at, true, &triggers); !st.ok()) return st;
    std::vector<std::string> begins;
    auto tags = Tags(f, at, depth, &begins);
    if (!tags.ok()) return tags.status();
    for (size_t i = 0; i < begins.size(); ++i) {
      const auto n = std::count_if(triggers.begin(), triggers.end(),
                                   [&](const std::string& t) { return absl::StartsWith(begins[i], t); });
      if (n != 1)
        return Bad(TagPlace(at, i) + ".begin",
                   absl::StrCat("'", begins[i], "' starts with ", n, " of the triggers; each tag needs exactly one"));
    }
    for (size_t i = 0; i < triggers.size(); ++i)
      if (std::none_of(begins.begin(), begins.end(),
                       [&](const std::string& b) { return absl::StartsWith(b, triggers[i]); }))
        return Bad(absl::StrCat(at, ".triggers[", i, "]"),
                   absl::StrCat("'", triggers[i], "' starts no tag's begin, so the output could never contain it"));
    bool at_least_one = false, stop_after_first = false;
    if (auto st = Flag(f, "at_least_one", at, &at_least_one); !st.ok()) return st;
    if (auto st = Flag(f, "stop_after_first", at, &stop_after_first); !st.ok()) return st;
    auto text = AnyText(f, at, triggers);
    if (!text.ok()) return text.status();
    const Symbol tag = *tags;
    if (at_least_one && stop_after_first) return tag;  // one tag, first
    if (stop_after_first) return b_.OneOf({{*text, tag}, {*text}}, "text-then-one-tag");
    if (at_least_one) return Rule({tag, b_.Repeat({*text, tag}, 0, -1, "text-and-tags"), *text}, "tags-first");
    return Rule({*text, b_.Repeat({tag, *text}, 0, -1, "tags-and-text")}, "triggered-tags");
  }

  absl::StatusOr<Symbol> TagsWithSeparator(const ojson& f, const std::string& at, int depth) {
    std::vector<std::string> begins;
    auto tags = Tags(f, at, depth, &begins);
    if (!tags.ok()) return tags.status();
    std::string separator;
    if (auto st = ReadString(f, "separator", at + ".separator", false, &separator); !st.ok()) return st;
    bool at_least_one = false, stop_after_first = false;
    if (auto st = Flag(f, "at_least_one", at, &at_least_one); !st.ok()) return st;
    if (auto st = Flag(f, "stop_after_first", at, &stop_after_first); !st.ok()) return st;
    const Symbol tag = *tags;
    Symbol some = tag;
    if (!stop_after_first) {
      std::vector<Symbol> next = b_.Literal(Spell(separator));
      next.push_back(tag);
      some = Rule({tag, b_.Repeat(next, 0, -1, "separated-tags")}, "tags");
    }
    if (at_least_one) return some;
    return b_.OneOf({{some}, {}}, "tags-or-none");
  }

  GrammarBuilder& b_;
  const StructuralTag& tag_;
  const bool legacy_;  // the structures-and-triggers form, compiled as triggered tags
};

// Every string value under the marker keys of a format.
void CollectMarkers(const ojson& f, std::vector<std::string>* out) {
  if (f.is_array()) {
    for (const ojson& e : f) CollectMarkers(e, out);
    return;
  }
  if (!f.is_object()) return;
  for (auto it = f.begin(); it != f.end(); ++it) {
    const std::string& k = it.key();
    if ((k == "value" || k == "begin" || k == "end" || k == "separator") && it->is_string()) {
      out->push_back(it->get<std::string>());
    } else if ((k == "triggers" || k == "excluded_str") && it->is_array()) {
      for (const ojson& s : *it)
        if (s.is_string()) out->push_back(s.get<std::string>());
    } else if (k == "content" || k == "elements" || k == "tags") {
      CollectMarkers(*it, out);
    }
  }
}

}  // namespace

ojson StructuralTag::ToJson() const {
  if (!format.is_null()) return {{"format", format}, {"special", special}};
  ojson structs = ojson::array();
  for (const Structure& s : structures) structs.push_back({{"begin", s.begin}, {"schema", s.schema}, {"end", s.end}});
  return {{"structures", structs}, {"triggers", triggers}, {"special", special}};
}

std::vector<std::string> StructuralTag::Markers() const {
  std::vector<std::string> out;
  if (!format.is_null()) {
    CollectMarkers(format, &out);
    return out;
  }
  out = triggers;
  for (const Structure& s : structures) {
    out.push_back(s.begin);
    out.push_back(s.end);
  }
  return out;
}

absl::StatusOr<StructuralTag> StructuralTag::Parse(const ojson& j) {
  if (!j.is_object()) return Bad("structural_tag", "must be an object with 'format', or 'structures' and 'triggers'");
  StructuralTag tag;
  if (const auto special = j.find("special"); special != j.end()) {
    if (!special->is_array()) return Bad("special", "must be a list of strings");
    for (const ojson& s : *special) {
      if (!s.is_string()) return Bad("special", "must be a list of strings");
      tag.special.push_back(s.get<std::string>());
    }
  }
  if (j.contains("format")) {
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "type" && it.key() != "format" && it.key() != "special")
        return Bad(it.key(), "is not a field of a structural tag with a 'format'");
    if (!j["format"].is_object()) return Bad("format", "must be a format: an object with a string 'type'");
    tag.format = j["format"];
    return tag;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k != "type" && k != "structures" && k != "triggers" && k != "special")
      return Bad(k, "is not a field of a structural tag (format; or structures and triggers)");
  }
  const auto structs = j.find("structures");
  if (structs == j.end() || !structs->is_array() || structs->empty())
    return Bad("structures", "must be a non-empty list of {begin, schema, end}");
  for (size_t i = 0; i < structs->size(); ++i) {
    const ojson& s = (*structs)[i];
    const std::string at = absl::StrCat("structures[", i, "]");
    if (!s.is_object()) return Bad(at, "must be an object with 'begin', 'schema' and 'end'");
    Structure out;
    if (auto st = ReadString(s, "begin", at + ".begin", true, &out.begin); !st.ok()) return st;
    if (auto st = ReadString(s, "end", at + ".end", false, &out.end); !st.ok()) return st;
    const auto schema = s.find("schema");
    if (schema == s.end()) return Bad(at + ".schema", "is required (a JSON schema)");
    if (auto st = ReadSchema(*schema, at + ".schema", &out.schema); !st.ok()) return st;
    tag.structures.push_back(std::move(out));
  }
  const auto triggers = j.find("triggers");
  if (triggers == j.end() || !triggers->is_array() || triggers->empty())
    return Bad("triggers", "must be a non-empty list of strings");
  size_t trigger_bytes = 0;
  for (size_t i = 0; i < triggers->size(); ++i) {
    const ojson& t = (*triggers)[i];
    if (!t.is_string() || t.get<std::string>().empty())
      return Bad(absl::StrCat("triggers[", i, "]"), "must be a non-empty string");
    tag.triggers.push_back(t.get<std::string>());
    trigger_bytes += tag.triggers.back().size();
  }
  // The free text's automaton has a state per trigger byte (each with a 256-entry table while
  // it is built): a bound keeps a request from asking for gigabytes.
  if (trigger_bytes > kMaxTriggerBytes)
    return Bad("triggers", absl::StrCat("hold ", trigger_bytes, " bytes in all; at most ", kMaxTriggerBytes));
  for (size_t i = 0; i < tag.structures.size(); ++i) {
    const std::string& begin = tag.structures[i].begin;
    if (std::none_of(tag.triggers.begin(), tag.triggers.end(),
                     [&](const std::string& t) { return absl::StartsWith(begin, t); }))
      return Bad(absl::StrCat("structures[", i, "].begin"),
                 absl::StrCat("'", begin, "' starts with none of the triggers, so it could never be reached"));
  }
  for (size_t i = 0; i < tag.triggers.size(); ++i) {
    const std::string& t = tag.triggers[i];
    if (std::none_of(tag.structures.begin(), tag.structures.end(),
                     [&](const Structure& s) { return absl::StartsWith(s.begin, t); }))
      return Bad(absl::StrCat("triggers[", i, "]"),
                 absl::StrCat("'", t, "' starts no structure's begin, so the output could never contain it"));
  }
  return tag;
}

absl::StatusOr<Symbol> AddStructuralTag(GrammarBuilder& b, const StructuralTag& tag) {
  FormatCompiler compiler(b, tag);
  if (!tag.format.is_null()) return compiler.Format(tag.format, "format", 0);
  // The first form is triggered tags whose contents are JSON schemas.
  ojson tags = ojson::array();
  for (const StructuralTag::Structure& st : tag.structures)
    tags.push_back(
        {{"begin", st.begin}, {"content", {{"type", "json_schema"}, {"json_schema", st.schema}}}, {"end", st.end}});
  return compiler.Format({{"type", "triggered_tags"}, {"triggers", tag.triggers}, {"tags", std::move(tags)}},
                         "structures", 0);
}

}  // namespace ls::structured
