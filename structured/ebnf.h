// EBNF → Grammar, in the GBNF dialect llama.cpp and xgrammar read: rules `name ::= alternatives`,
// alternatives separated by |, sequences of "literals" (escapes \n \t \r \\ \" \xHH \uHHHH),
// [character classes] (as in regex.h), rule names, (groups), . (any character), and the
// quantifiers * + ? {m} {m,} {m,n}; # starts a comment. `root` is the start rule. Errors name the
// line and what was wrong.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "structured/grammar.h"

namespace ls::structured {

absl::StatusOr<Grammar> EbnfGrammar(std::string_view text);
// A rule of `b` matching what the grammar's root matches.
absl::StatusOr<Symbol> AddEbnf(GrammarBuilder& b, std::string_view text);

}  // namespace ls::structured
