// Regular expressions → Grammar, matching the whole text (structured_outputs regex, JSON schema
// pattern). The syntax: literals (UTF-8), escapes (\. \\ \t \n \r \f \v \xHH \uHHHH), the classes
// \d \D \w \W \s \S, . (any character but a newline), [...] with ranges and negation, groups
// (...) and (?:...), alternation, the quantifiers * + ? {n} {n,} {n,m} (a trailing ? for laziness
// is accepted and changes nothing), ^ at the start and $ at the end. Backreferences, lookaround,
// named groups and flags are refused by name. A negated class, \D \W \S and . include every
// non-ASCII character; non-ASCII characters in a positive class must be listed, not given as
// ranges.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "structured/grammar.h"

namespace ls::structured {

enum class RegexText {
  kRaw,         // the text itself
  kJsonString,  // the text inside a JSON string: quotes, backslashes and control characters escaped
};

absl::StatusOr<Grammar> RegexGrammar(std::string_view pattern);
// A rule of `b` matching what `pattern` matches, written as `text`.
absl::StatusOr<Symbol> AddRegex(GrammarBuilder& b, std::string_view pattern, RegexText text);

}  // namespace ls::structured
