// Grammar: the context-free grammar over bytes that constrained decoding follows, the common form
// every front-end syntax compiles to (JSON schemas, regular expressions, EBNF, choices). A rule
// is a list of alternatives, each a sequence of symbols: a byte set, or a reference to a rule.
// Repetition and options are written as helper rules by the compilers (GrammarBuilder), so the
// matcher (matcher.h) sees only sequences and alternatives. Rule 0 is the root. Left recursion is
// refused when the grammar is finished (the matcher expands rules depth first).
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ls::structured {

using ByteSet = std::bitset<256>;
// The bytes lo..hi, both included.
inline ByteSet ByteRange(int lo, int hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(b);
  return s;
}

// The byte a special token's bytes begin with in a vocabulary given to the matcher (vocabulary.h):
// no UTF-8 text has it, so a special token matches only where a grammar writes it as a marker
// (SpecialToken), never inside free text or a JSON string.
constexpr uint8_t kSpecialTokenByte = 0xFF;
inline std::string SpecialToken(std::string_view text) { return std::string(1, '\xFF') + std::string(text); }

struct Symbol {
  enum Kind : uint8_t { kBytes, kRule };
  Kind kind = kBytes;
  int32_t index = 0;  // kBytes: into Grammar::sets; kRule: the rule
};

struct Grammar {
  std::vector<std::vector<std::vector<Symbol>>> rules;  // rule → alternatives → symbols
  std::vector<std::string> names;                        // per rule, for messages
  std::vector<ByteSet> sets;
};

// Builds a Grammar: rules are declared (by name), given alternatives, and helpers write the
// common shapes. Byte sets are interned.
class GrammarBuilder {
 public:
  GrammarBuilder();  // declares the root, rule 0
  int32_t Declare(std::string name);
  void AddAlternative(int32_t rule, std::vector<Symbol> symbols);
  Symbol Bytes(const ByteSet& set);
  Symbol Byte(uint8_t b);
  static Symbol Ref(int32_t rule) { return {Symbol::kRule, rule}; }
  // The symbols that match `text` exactly.
  std::vector<Symbol> Literal(std::string_view text);
  // A new rule matching `inner` (a sequence) between min and max times (max < 0: no limit).
  Symbol Repeat(const std::vector<Symbol>& inner, int64_t min, int64_t max, const std::string& name);
  // A new rule matching one of the sequences.
  Symbol OneOf(const std::vector<std::vector<Symbol>>& alternatives, const std::string& name);
  // Any valid UTF-8 character whose first byte is in `ascii` when it is ASCII (multi-byte
  // characters always): the character class of JSON strings and regex dots.
  Symbol Utf8Char(const ByteSet& ascii, const std::string& name);
  // Any bytes but kSpecialTokenByte that do not contain `stop` (non-empty): free text up to a
  // marker. Its rules are tail calls, so the matcher's stack stays flat however long the text.
  Symbol TextWithout(std::string_view stop, const std::string& name);
  // The same for several stops (each non-empty): text that contains none of them.
  Symbol TextWithoutAny(const std::vector<std::string>& stops, const std::string& name);

  int32_t num_rules() const { return static_cast<int32_t>(g_.rules.size()); }
  // The grammar, checked: every rule has an alternative, no rule is left recursive, the root
  // reaches no undefined rule, and the root finishes (DropUnfinishable). Errors name the rule.
  absl::StatusOr<Grammar> Finish() &&;

 private:
  Grammar g_;
  int32_t utf8_tail_ = -1;  // rule: one continuation byte
};

// Checks a finished grammar (used by Finish and by tests).
absl::Status CheckGrammar(const Grammar& g);
// Drops the alternatives that can never finish (each needs a rule that only ever refers onward to
// itself, or a byte set of no byte), so that the matcher never enters one and then has no token to
// allow; an error when the root has none left (the grammar matches no text).
absl::Status DropUnfinishable(Grammar* g);

}  // namespace ls::structured
