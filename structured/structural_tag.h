// StructuralTag: the structural tag of vLLM and xgrammar, in both its forms. The first lists
// structures ({"structures": [{"begin", "schema", "end"}], "triggers"}): text is free but never
// holds a trigger except to open a structure whose begin it starts, then come the rest of that
// begin, a JSON value the schema accepts and the end, then free text again, as often as the
// output likes. The second is a format ({"format": {"type": ...}}) built from const_string,
// json_schema, grammar, regex, any_text, sequence, or, tag, triggered_tags (the first form's
// behaviour, with at_least_one and stop_after_first) and tags_with_separator. Used by
// OutputConstraint.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "structured/grammar.h"

namespace ls::structured {

struct StructuralTag {
  static constexpr size_t kMaxTriggerBytes = 4096;  // all the stops of one free text together
  static constexpr int kMaxDepth = 32;              // formats inside formats

  struct Structure {
    std::string begin, end;
    nlohmann::ordered_json schema;
  };
  // The first form (format is null).
  std::vector<Structure> structures;
  std::vector<std::string> triggers;
  // The second form.
  nlohmann::ordered_json format;
  // Markers (triggers, begins, ends, separators, constant strings, or a leading part of one) that
  // are the model's special tokens: the grammar spells them behind kSpecialTokenByte, as the
  // vocabulary does.
  std::vector<std::string> special;

  // The tag as JSON, which Parse reads back.
  nlohmann::ordered_json ToJson() const;
  // Every string the grammar matches literally (what `special` is drawn from).
  std::vector<std::string> Markers() const;
  // Reads either form ("type" and "special" optional). Errors name the field ("structures[1].begin")
  // and what is wrong: in the first form every structure's begin must start with a trigger, and
  // every trigger must start a structure's begin. A format is checked as its grammar is built.
  static absl::StatusOr<StructuralTag> Parse(const nlohmann::ordered_json& j);
};

// A rule of `b` matching the outputs the tag allows. Errors name the place in the format
// ("format.elements[1].triggers").
absl::StatusOr<Symbol> AddStructuralTag(GrammarBuilder& b, const StructuralTag& tag);

}  // namespace ls::structured
