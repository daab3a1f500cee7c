// Constraint kinds to grammars, and the compiled-grammar cache.
#include "structured/output_constraint.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "structured/ebnf.h"
#include "structured/json_schema.h"
#include "structured/regex.h"
#include "structured/structural_tag.h"

namespace ls::structured {

const char* OutputConstraint::KindName() const {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kJsonSchema: return "json_schema";
    case Kind::kJsonObject: return "json_object";
    case Kind::kRegex: return "regex";
    case Kind::kChoice: return "choice";
    case Kind::kGrammar: return "grammar";
    case Kind::kStructuralTag:
      return "structural_tag";
  }
  return "none";
}

std::string OutputConstraint::Key() const {
  std::string key = absl::StrCat(KindName(), ":", text.size(), ":", text);
  for (const std::string& c : choices) absl::StrAppend(&key, ":", c.size(), ":", c);
  return key;
}

absl::StatusOr<Symbol> AddConstraint(GrammarBuilder& b, const OutputConstraint& c) {
  switch (c.kind) {
    case OutputConstraint::Kind::kJsonSchema: {
      const auto schema = nlohmann::ordered_json::parse(c.text, nullptr, false);
      if (schema.is_discarded()) return absl::InvalidArgumentError("the JSON schema is not valid JSON");
      return AddJsonSchema(b, schema, "schema");
    }
    case OutputConstraint::Kind::kJsonObject:
      return AddJsonSchema(b, nlohmann::ordered_json{{"type", "object"}}, "object");
    case OutputConstraint::Kind::kRegex:
      return AddRegex(b, c.text, RegexText::kRaw);
    case OutputConstraint::Kind::kGrammar:
      return AddEbnf(b, c.text);
    case OutputConstraint::Kind::kChoice: {
      if (c.choices.empty()) return absl::InvalidArgumentError("'choice' needs at least one string");
      std::vector<std::vector<Symbol>> alts;
      for (const std::string& s : c.choices) {
        if (s.empty()) return absl::InvalidArgumentError("a 'choice' must not be empty");
        alts.push_back(b.Literal(s));
      }
      return b.OneOf(alts, "choice");
    }
    case OutputConstraint::Kind::kStructuralTag: {
      auto tag = StructuralTag::Parse(nlohmann::ordered_json::parse(c.text, nullptr, false));
      if (!tag.ok()) return tag.status();
      return AddStructuralTag(b, *tag);
    }
    case OutputConstraint::Kind::kNone:
      break;
  }
  return absl::InvalidArgumentError("no output constraint");
}

absl::StatusOr<Grammar> BuildGrammar(const OutputConstraint& c) {
  if (c.kind == OutputConstraint::Kind::kRegex) return RegexGrammar(c.text);
  if (c.kind == OutputConstraint::Kind::kJsonSchema) {
    const auto schema = nlohmann::ordered_json::parse(c.text, nullptr, false);
    if (schema.is_discarded()) return absl::InvalidArgumentError("the JSON schema is not valid JSON");
    return JsonSchemaGrammar(schema);
  }
  GrammarBuilder b;
  auto root = AddConstraint(b, c);
  if (!root.ok()) return root.status();
  b.AddAlternative(0, {*root});
  return std::move(b).Finish();
}

GrammarCache::GrammarCache(std::vector<std::string> token_bytes, size_t capacity)
    : trie_(std::make_shared<TokenTrie>(token_bytes)), capacity_(capacity) {}

absl::StatusOr<std::shared_ptr<CompiledGrammar>> GrammarCache::Get(const OutputConstraint& c) {
  return Get(c.Key(), c.KindName(), [&c] { return BuildGrammar(c); });
}

absl::StatusOr<std::shared_ptr<CompiledGrammar>> GrammarCache::Get(
    const std::string& key, const std::string& description, const std::function<absl::StatusOr<Grammar>()>& build) {
  {
    MutexLock lock(&mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Compiled outside the lock: a large schema takes a while, and other requests go on meanwhile.
  auto grammar = build();
  if (!grammar.ok()) return grammar.status();
  auto compiled = std::make_shared<CompiledGrammar>(std::move(*grammar), trie_, description);
  MutexLock lock(&mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;  // compiled meanwhile
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

size_t GrammarCache::size() {
  MutexLock lock(&mu_);
  return lru_.size();
}

}  // namespace ls::structured
