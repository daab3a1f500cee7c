// Regular expressions: whole-text matches for each construct, the text a JSON string writes the
// match as, and the constructs refused by name.
#include "structured/regex.h"

#include <gtest/gtest.h>

#include "tests/structured/match_util.h"

namespace ls::structured {
namespace {

struct Case {
  const char* pattern;
  std::vector<std::string> match, reject;
};

TEST(Regex, MatchesWholeTexts) {
  const std::vector<Case> cases = {
      {"abc", {"abc"}, {"ab", "abcd", ""}},
      {"a|bc|", {"a", "bc", ""}, {"b", "abc"}},
      {"[a-c]+x?", {"a", "cab", "abx"}, {"x", "ad"}},
      {"[^a-c\\n]", {"d", "\xC3\xA9", "Z"}, {"a", "\n", "dd"}},
      {"\\d{3}-\\d{2,4}", {"123-45", "000-1234"}, {"12-34", "123-4", "123-12345"}},
      {"\\w+\\s\\W", {"a_1 !", "Z\t-"}, {"a b", " !"}},
      {"(ab){2,}", {"abab", "ababab"}, {"ab", "aba"}},
      {"(?:x|y)*z", {"z", "xyxz"}, {"xy", "zz"}},
      {"^[0-9]+(\\.[0-9]+)?$", {"7", "3.14"}, {"3.", ".5"}},
      {"a.c",
       {"abc",
        "a\xE4\xB8\xAD"
        "c"},
       {"a\nc", "ac"}},
      {"\\x41\\u00e9\\.", {"A\xC3\xA9."}, {"A\xC3\xA9x"}},
      {"colou?r", {"color", "colour"}, {"colouur"}},
      {"[\\d\\-+]{1,3}", {"-", "1+2"}, {"1234", "a"}},
      {"a{0}b", {"b"}, {"ab"}},
      {"a{0012}", {"aaaaaaaaaaaa"}, {"aaaaaaaaaaa", "a{0012}"}},
      {"(a|b)*?c", {"c", "abac"}, {"abca"}},
      {"(a?)*b", {"b", "aab"}, {"a"}},
      {"(a*|b)+c", {"c", "aabac"}, {"ca"}},
      {"\\[\\]\\{\\}\\(\\)\\*\\+\\?\\|\\^\\$\\\\", {"[]{}()*+?|^$\\"}, {""}},
  };
  for (const Case& c : cases) {
    auto g = RegexGrammar(c.pattern);
    ASSERT_TRUE(g.ok()) << c.pattern << ": " << g.status();
    for (const auto& m : c.match) EXPECT_TRUE(Matches(*g, m)) << c.pattern << " should match '" << m << "'";
    for (const auto& r : c.reject) EXPECT_FALSE(Matches(*g, r)) << c.pattern << " should not match '" << r << "'";
  }
}

TEST(Regex, JsonStringTextEscapesWhatJsonMust) {
  GrammarBuilder b;
  auto inner = AddRegex(b, "a\"b\\\\c\\n", RegexText::kJsonString);
  ASSERT_TRUE(inner.ok()) << inner.status();
  b.AddAlternative(0, {*inner});
  auto g = std::move(b).Finish();
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(Matches(*g, "a\\\"b\\\\c\\n"));  // a"b\c<newline>, written inside a JSON string
  EXPECT_FALSE(Matches(*g, "a\"b\\c\n"));
}

TEST(Regex, RefusesWhatItCannotMatchNamingIt) {
  const std::vector<std::pair<const char*, const char*>> refused = {
      {"(a)\\1", "backreference"},
      {"a(?=b)", "lookaround"},
      {"(?<=a)b", "lookaround"},
      {"(?<name>a)", "named groups"},
      {"(?i)a", "flags"},
      {"a{3,1}", "{3,1}"},
      {"[b-a]", "range"},
      {"(ab", "not closed"},
      {"ab)", "unexpected ')'"},
      {"*a", "nothing to repeat"},
      {"a\\", "trailing"},
      // A count is read whole however long: too many copies, not the literal text "{99999999}".
      {"a{99999999}", "repetitions"},
      {"a{2,123456789012345678901234567890}", "repetitions"},
  };
  for (const auto& [pattern, word] : refused) {
    auto g = RegexGrammar(pattern);
    ASSERT_FALSE(g.ok()) << pattern;
    EXPECT_NE(g.status().message().find(word), std::string::npos) << pattern << ": " << g.status();
  }
}

// A multi-byte character cut short by the end of the pattern (found by the fuzz target): read as
// far as it goes, never past the end.
TEST(Regex, TruncatedUtf8AtTheEndStaysInBounds) {
  // Long enough to live on the heap, where reading past the end is caught under ASan.
  for (const std::string& p : {"[a-z]{" + std::string(41, '\xff'), std::string(30, 'a') + "\xf0\x9f", std::string("\xe2")}) {
    const absl::StatusOr<Grammar> g = RegexGrammar(p);
    EXPECT_TRUE(g.ok() || g.status().code() == absl::StatusCode::kInvalidArgument) << g.status();
  }
}

}  // namespace
}  // namespace ls::structured
