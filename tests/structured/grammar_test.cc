// GrammarBuilder and CheckGrammar: repetitions, alternatives, UTF-8 characters, the grammars
// refused (empty rules, left recursion, a root that never finishes), with messages naming the rule,
// and the dead-end alternatives dropped.
#include "structured/grammar.h"

#include <gtest/gtest.h>

#include "tests/structured/match_util.h"

namespace ls::structured {
namespace {

TEST(Grammar, RepeatCountsBetweenMinAndMax) {
  GrammarBuilder b;
  b.AddAlternative(0, {b.Repeat({b.Byte('a')}, 2, 4, "a")});
  auto g = std::move(b).Finish();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(Matches(*g, "a"));
  EXPECT_TRUE(Matches(*g, "aa"));
  EXPECT_TRUE(Matches(*g, "aaaa"));
  EXPECT_FALSE(Matches(*g, "aaaaa"));
  EXPECT_FALSE(IsPrefix(*g, "aaaaa"));
  EXPECT_TRUE(IsPrefix(*g, "a"));
}

TEST(Grammar, UnboundedRepeatKeepsTheAutomatonSmall) {
  // `tail ::= x tail | ε` is a tail call: ten thousand repetitions revisit the same few states.
  GrammarBuilder b;
  b.AddAlternative(0, {b.Byte('['), b.Repeat({b.Byte('x')}, 0, -1, "xs"), b.Byte(']')});
  auto g = std::move(b).Finish();
  ASSERT_TRUE(g.ok());
  CompiledGrammar c(*g, ByteTrie(), "test");
  const std::string text = "[" + std::string(10000, 'x') + "]";
  const int32_t s = Walk(c, text);
  ASSERT_GE(s, 0);
  EXPECT_TRUE(c.Accepting(s));
  EXPECT_TRUE(c.Final(s));
  EXPECT_LE(c.num_states(), 4u);
}

TEST(Grammar, RepeatOfSomethingThatMayBeEmptyIsNotLeftRecursive) {
  GrammarBuilder b;
  const Symbol maybe_a = b.Repeat({b.Byte('a')}, 0, 1, "a?");
  b.AddAlternative(0, {b.Repeat({maybe_a, b.Repeat({b.Byte('b')}, 0, 1, "b?")}, 0, -1, "(a?b?)*"), b.Byte('!')});
  auto g = std::move(b).Finish();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Matches(*g, "!"));
  EXPECT_TRUE(Matches(*g, "abba!"));
  EXPECT_FALSE(Matches(*g, "abc!"));
}

TEST(Grammar, UtfCharactersAreWellFormed) {
  GrammarBuilder b;
  ByteSet letters;
  for (int c = 'a'; c <= 'z'; ++c) letters.set(c);
  b.AddAlternative(0, {b.Repeat({b.Utf8Char(letters, "ch")}, 1, -1, "chars")});
  auto g = std::move(b).Finish();
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(Matches(*g, "abc"));
  EXPECT_TRUE(Matches(*g, "caf\xC3\xA9"));             // é
  EXPECT_TRUE(Matches(*g, "\xE4\xB8\xAD\xF0\x9F\x98\x80"));  // 中 😀
  EXPECT_FALSE(Matches(*g, "A"));                       // ASCII outside the class
  EXPECT_FALSE(IsPrefix(*g, "\xC0\xAF"));              // overlong
  EXPECT_FALSE(IsPrefix(*g, "\xED\xA0\x80"));          // a surrogate
  EXPECT_FALSE(IsPrefix(*g, "\xF4\x90"));              // past U+10FFFF
  EXPECT_FALSE(Matches(*g, "\xC3"));                   // cut short
}

// Text without any of several stops, then the stop that ends it: overlapping stops, a stop inside
// another, and a stop whose start is another's end are found wherever they begin.
TEST(Grammar, TextWithoutAnyStopsAtTheFirstOfItsStops) {
  const std::vector<std::string> stops = {"abc", "bcd", "cab", "ca"};
  GrammarBuilder b;
  std::vector<std::vector<Symbol>> ends;
  for (const std::string& s : stops) ends.push_back(b.Literal(s));
  b.AddAlternative(0, {b.TextWithoutAny(stops, "text"), b.OneOf(ends, "stop")});
  auto g = std::move(b).Finish();
  ASSERT_TRUE(g.ok()) << g.status();
  for (const char* text : {"abc", "xxabc", "abbcd", "ca", "xca"}) EXPECT_TRUE(Matches(*g, text)) << text;
  // A stop inside the text ends it there, so more may not follow.
  for (const char* text : {"abcabc", "xcax", "cax", "cabx", ""}) EXPECT_FALSE(Matches(*g, text)) << text;
  // The brute-force reading of the same rule on every string of a, b, c, d up to five bytes: some
  // stop ends the string, and what comes before that stop holds none.
  const auto contains_stop = [&](const std::string& t) {
    for (const std::string& s : stops)
      if (t.find(s) != std::string::npos) return true;
    return false;
  };
  const auto ends_with_first_stop = [&](const std::string& t) {
    for (const std::string& s : stops)
      if (t.size() >= s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0 &&
          !contains_stop(t.substr(0, t.size() - s.size())))
        return true;
    return false;
  };
  std::vector<std::string> all = {""};
  for (int len = 1; len <= 5; ++len) {
    std::vector<std::string> next;
    for (const std::string& t : all)
      if (t.size() + 1 == static_cast<size_t>(len))
        for (char c : std::string("abcd")) next.push_back(t + c);
    all.insert(all.end(), next.begin(), next.end());
  }
  for (const std::string& t : all) EXPECT_EQ(Matches(*g, t), ends_with_first_stop(t)) << "'" << t << "'";
}

TEST(Grammar, TextWithoutAnyNeverTakesTheSpecialTokenByte) {
  GrammarBuilder b;
  b.AddAlternative(0, {b.TextWithoutAny({"x", SpecialToken("<s>")}, "text")});
  auto g = std::move(b).Finish();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Matches(*g, "abc<s>"));
  EXPECT_FALSE(Matches(*g, SpecialToken("<s>")));
  EXPECT_FALSE(Matches(*g, "ax"));
}

TEST(Grammar, LeftRecursionIsRefusedNamingTheRule) {
  GrammarBuilder b;
  const int32_t expr = b.Declare("expr");
  std::vector<Symbol> plus = {GrammarBuilder::Ref(expr), b.Byte('+'), b.Byte('1')};
  b.AddAlternative(expr, plus);
  b.AddAlternative(expr, {b.Byte('1')});
  b.AddAlternative(0, {GrammarBuilder::Ref(expr)});
  auto g = std::move(b).Finish();
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("'expr' is left recursive"), std::string::npos) << g.status();
}

TEST(Grammar, LeftRecursionThroughAnEmptyPrefixIsRefused) {
  GrammarBuilder b;
  const int32_t a = b.Declare("a");
  const Symbol opt = b.Repeat({b.Byte('x')}, 0, 1, "x?");
  b.AddAlternative(a, {opt, GrammarBuilder::Ref(a), b.Byte('y')});
  b.AddAlternative(a, {b.Byte('z')});
  b.AddAlternative(0, {GrammarBuilder::Ref(a)});
  auto g = std::move(b).Finish();
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("left recursive"), std::string::npos);
}

TEST(Grammar, RightRecursionNestsAndMatches) {
  // list ::= "(" list ")" | "" : balanced parentheses, a true stack.
  GrammarBuilder b;
  const int32_t list = b.Declare("list");
  b.AddAlternative(list, {b.Byte('('), GrammarBuilder::Ref(list), b.Byte(')')});
  b.AddAlternative(list, {});
  b.AddAlternative(0, {GrammarBuilder::Ref(list), b.Byte('.')});
  auto g = std::move(b).Finish();
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(Matches(*g, "."));
  EXPECT_TRUE(Matches(*g, "((()))."));
  EXPECT_FALSE(IsPrefix(*g, "(()."));
  EXPECT_FALSE(IsPrefix(*g, "())"));
}

TEST(Grammar, ARuleWithoutAlternativesIsRefused) {
  GrammarBuilder b;
  const int32_t r = b.Declare("nothing");
  b.AddAlternative(0, {GrammarBuilder::Ref(r)});
  auto g = std::move(b).Finish();
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("'nothing' has no alternative"), std::string::npos);
}

TEST(Grammar, TooManyRepetitionsAreRefused) {
  GrammarBuilder b;
  b.AddAlternative(0, {b.Repeat({b.Byte('a')}, 0, int64_t{1} << 40, "a")});
  auto g = std::move(b).Finish();
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("repetitions"), std::string::npos) << g.status();
}

// `root ::= root`: every alternative needs itself, so nothing finishes. Left in, the matcher would
// find no token to allow at the first step.
TEST(Grammar, ARootThatNeverFinishesIsRefused) {
  for (bool through_another : {false, true}) {
    GrammarBuilder b;
    if (through_another) {
      const int32_t r = b.Declare("loop");
      b.AddAlternative(r, {b.Byte('x'), GrammarBuilder::Ref(0)});
      b.AddAlternative(0, {GrammarBuilder::Ref(r)});
    } else {
      b.AddAlternative(0, {GrammarBuilder::Ref(0)});
    }
    auto g = std::move(b).Finish();
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find("matches no text: its root rule 'root' never finishes"), std::string::npos)
        << g.status();
  }
}

// `root ::= "a" dead | "b"` with `dead ::= "c" dead`: after "a" no text could finish, so the
// alternative is dropped and "a" is never allowed; the rest of the grammar stands.
TEST(Grammar, AlternativesThatNeverFinishAreDropped) {
  GrammarBuilder b;
  const int32_t dead = b.Declare("dead");
  b.AddAlternative(dead, {b.Byte('c'), GrammarBuilder::Ref(dead)});
  b.AddAlternative(0, {b.Byte('a'), GrammarBuilder::Ref(dead)});
  b.AddAlternative(0, {b.Byte('b')});
  b.AddAlternative(0, {b.Bytes(ByteSet()), b.Byte('d')});  // a byte set of no byte
  auto g = std::move(b).Finish();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Matches(*g, "b"));
  EXPECT_FALSE(IsPrefix(*g, "a"));
  EXPECT_FALSE(IsPrefix(*g, "d"));
  EXPECT_EQ(g->rules[0].size(), 1u);
}

}  // namespace
}  // namespace ls::structured
