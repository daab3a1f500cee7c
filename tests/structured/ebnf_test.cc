// EBNF (GBNF): rules, literals with escapes, classes, groups, quantifiers, comments, and errors
// naming the line.
#include "structured/ebnf.h"

#include <gtest/gtest.h>

#include "tests/structured/match_util.h"

namespace ls::structured {
namespace {

TEST(Ebnf, ArithmeticExpressions) {
  auto g = EbnfGrammar(R"g(
# sums of products of numbers and parenthesized expressions
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")"
number ::= [0-9]+
)g");
  ASSERT_TRUE(g.ok()) << g.status();
  for (const char* ok : {"1", "1+2*3", "(1+2)*3", "((4))/2-10"}) EXPECT_TRUE(Matches(*g, ok)) << ok;
  for (const char* bad : {"", "1+", "(1", "1)", "a", "1 + 2"}) EXPECT_FALSE(Matches(*g, bad)) << bad;
}

TEST(Ebnf, LiteralsClassesAndQuantifiers) {
  auto g = EbnfGrammar(
      "root ::= \"say \\\"\" word{1,3} \"\\\"\\n\" tail?\n"
      "word ::= [a-zA-Z\\xC3\\xA9]+ \" \"?\n"
      "tail ::= [^\\n]* | \"\\u00e9\"\n");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Matches(*g, "say \"hi there \"\n"));
  EXPECT_TRUE(Matches(*g, "say \"a\"\nrest of it"));
  EXPECT_FALSE(Matches(*g, "say \"\"\n"));
  EXPECT_FALSE(Matches(*g, "say \"a b c d\"\n"));
}

TEST(Ebnf, AnyCharacterAndAlternativesOnSeveralLines) {
  auto g = EbnfGrammar("root ::= item (\",\" item)*\nitem ::= \"<\" . \">\"\n  | \"none\"\n");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Matches(*g, "<x>,none,<\xE4\xB8\xAD>"));
  EXPECT_FALSE(Matches(*g, "<xy>"));
}

TEST(Ebnf, ErrorsNameTheLineAndTheProblem) {
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"root ::= missing\n", "missing"},
      {"root ::= \"a\"\nroot ::= \"b\"\n", "root"},
      {"start ::= \"a\"\n", "root"},
      {"root ::= \"a\n", "line 1"},
      {"root ::= [a-\n", "line 1"},
      {"root ::= \"a\"\nx ::= ( \"b\"\n", "line 2"},
      {"root ::= root \"a\" | \"b\"\n", "left recursive"},
      {"root = \"a\"\n", "::="},
  };
  for (const auto& [text, word] : bad) {
    auto g = EbnfGrammar(text);
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.status().message().find(word), std::string::npos) << text << ": " << g.status();
  }
}

}  // namespace
}  // namespace ls::structured
