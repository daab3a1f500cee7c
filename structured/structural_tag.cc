// StructuralTag: reading the tag and its grammar.
#include "structured/structural_tag.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "structured/json_schema.h"

namespace ls::structured {
namespace {

using ojson = nlohmann::ordered_json;

absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("structural tag: '", field, "' ", what));
}

// A non-empty string field of `j`.
absl::Status ReadString(const ojson& j, const char* key, const std::string& field, bool non_empty, std::string* out) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return Bad(field, "must be a string");
  *out = it->get<std::string>();
  if (non_empty && out->empty()) return Bad(field, "must not be empty");
  return absl::OkStatus();
}

// `text` as the vocabulary writes it: a leading special marker behind kSpecialTokenByte.
std::string Spell(const StructuralTag& tag, const std::string& text) {
  const std::string* longest = nullptr;
  for (const std::string& s : tag.special)
    if (!s.empty() && absl::StartsWith(text, s) && (!longest || s.size() > longest->size())) longest = &s;
  if (!longest) return text;
  return SpecialToken(*longest) + text.substr(longest->size());
}

}  // namespace

ojson StructuralTag::ToJson() const {
  ojson structs = ojson::array();
  for (const Structure& s : structures) structs.push_back({{"begin", s.begin}, {"schema", s.schema}, {"end", s.end}});
  return {{"structures", structs}, {"triggers", triggers}, {"special", special}};
}

absl::StatusOr<StructuralTag> StructuralTag::Parse(const ojson& j) {
  if (!j.is_object()) return Bad("structural_tag", "must be an object with 'structures' and 'triggers'");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "format")
      return Bad("format", "(the newer structural-tag form) is not supported yet; send 'structures' and 'triggers'");
    if (k != "type" && k != "structures" && k != "triggers" && k != "special")
      return Bad(k, "is not a field of a structural tag (structures, triggers)");
  }
  StructuralTag tag;
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
    if (schema->is_string()) {
      out.schema = ojson::parse(schema->get<std::string>(), nullptr, false);
      if (out.schema.is_discarded()) return Bad(at + ".schema", "is not valid JSON");
    } else {
      out.schema = *schema;
    }
    if (!out.schema.is_object() && !out.schema.is_boolean()) return Bad(at + ".schema", "must be a JSON schema");
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
  if (const auto special = j.find("special"); special != j.end()) {
    if (!special->is_array()) return Bad("special", "must be a list of strings");
    for (const ojson& s : *special) {
      if (!s.is_string()) return Bad("special", "must be a list of strings");
      tag.special.push_back(s.get<std::string>());
    }
  }
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
  std::vector<std::string> stops;
  for (const std::string& t : tag.triggers) stops.push_back(Spell(tag, t));
  std::vector<std::vector<Symbol>> tagged;
  for (size_t i = 0; i < tag.structures.size(); ++i) {
    const StructuralTag::Structure& s = tag.structures[i];
    auto value = AddJsonSchema(b, s.schema, absl::StrCat("structures[", i, "].schema"));
    if (!value.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("structural tag: 'structures[", i, "].schema': ", value.status().message()));
    std::vector<Symbol> alt = b.Literal(Spell(tag, s.begin));
    alt.push_back(*value);
    for (const Symbol& sym : b.Literal(Spell(tag, s.end))) alt.push_back(sym);
    tagged.push_back(std::move(alt));
  }
  const Symbol text = b.TextWithoutAny(stops, "free-text");
  const Symbol structure = b.OneOf(tagged, "structure");
  return b.OneOf({{text, b.Repeat({structure, text}, 0, -1, "structures")}}, "structural-tag");
}

}  // namespace ls::structured
