// OutputConstraint: what a request asks its output to be (a JSON schema, any JSON object, a
// regex, one of some strings, an EBNF grammar, a structural tag), and the GrammarCache that compiles each distinct
// constraint once per vocabulary and hands out the compiled grammar (matcher.h) every request of
// that shape shares, with its lazily built automaton and token masks.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "structured/matcher.h"

namespace ls::structured {

struct OutputConstraint {
  enum class Kind { kNone, kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar, kStructuralTag };
  Kind kind = Kind::kNone;
  std::string text;  // the schema (JSON text), the regex, the grammar or the tag (StructuralTag::ToJson)
  std::vector<std::string> choices;  // kChoice
  bool empty() const { return kind == Kind::kNone; }
  // A key naming the constraint exactly (the cache's).
  std::string Key() const;
  // "json_schema", "regex", ... (for logs and metrics).
  const char* KindName() const;
};

// The grammar of a constraint (errors: InvalidArgument naming what is unsupported or wrong).
absl::StatusOr<Grammar> BuildGrammar(const OutputConstraint& c);
// A rule of `b` matching what the constraint accepts (for grammars that embed it).
absl::StatusOr<Symbol> AddConstraint(GrammarBuilder& b, const OutputConstraint& c);

class GrammarCache {
 public:
  // token_bytes[t]: the bytes token t stands for ("" for control tokens, which a grammar never
  // matches). Keeps up to `capacity` compiled grammars, least recently used first out.
  GrammarCache(std::vector<std::string> token_bytes, size_t capacity = 256);
  absl::StatusOr<std::shared_ptr<CompiledGrammar>> Get(const OutputConstraint& c);
  // The grammar `key` names, built by `build` when it is not cached.
  absl::StatusOr<std::shared_ptr<CompiledGrammar>> Get(const std::string& key, const std::string& description,
                                                        const std::function<absl::StatusOr<Grammar>()>& build);
  size_t size();
  const std::shared_ptr<const TokenTrie>& trie() const { return trie_; }

 private:
  std::shared_ptr<const TokenTrie> trie_;
  size_t capacity_;
  Mutex mu_;
  // Most recent first.
  std::list<std::pair<std::string, std::shared_ptr<CompiledGrammar>>> lru_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::list<std::pair<std::string, std::shared_ptr<CompiledGrammar>>>::iterator>
      index_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ls::structured
