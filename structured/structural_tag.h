// StructuralTag: free text in which tagged structures appear, each held to a JSON schema — the
// structural tag of vLLM and xgrammar ({"structures": [{"begin", "schema", "end"}], "triggers"}).
// Text between structures is free but never contains a trigger; a trigger starts a structure
// whose begin it opens, then come the rest of that begin, a JSON value the schema accepts, and
// the end; then free text again, as often as the output likes. Used by OutputConstraint.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "structured/grammar.h"

namespace ls::structured {

struct StructuralTag {
  static constexpr size_t kMaxTriggerBytes = 4096;  // all triggers together

  struct Structure {
    std::string begin, end;
    nlohmann::ordered_json schema;
  };
  std::vector<Structure> structures;
  std::vector<std::string> triggers;
  // Markers (triggers, begins, ends, or a leading part of one) that are the model's special
  // tokens: the grammar spells them behind kSpecialTokenByte, as the vocabulary does.
  std::vector<std::string> special;

  // The tag as JSON ({"structures", "triggers", "special"}), which Parse reads back.
  nlohmann::ordered_json ToJson() const;
  // Reads {"structures", "triggers"} ("type" and "special" optional). Errors name the field
  // ("structures[1].begin") and what is wrong: every structure's begin must start with a
  // trigger, and every trigger must start a structure's begin.
  static absl::StatusOr<StructuralTag> Parse(const nlohmann::ordered_json& j);
};

// A rule of `b` matching the outputs the tag allows.
absl::StatusOr<Symbol> AddStructuralTag(GrammarBuilder& b, const StructuralTag& tag);

}  // namespace ls::structured
