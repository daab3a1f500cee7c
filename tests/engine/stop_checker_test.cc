// StopChecker: stop strings found across pieces and never emitted (or, asked to, ending the
// text); held text released later.
#include "engine/stop_checker.h"

#include <gtest/gtest.h>

namespace ls {
namespace {

TEST(StopChecker, FindsStopAcrossPiecesAndNeverEmitsIt) {
  StopChecker c({"END", "\n\n"});
  bool stopped = false;
  std::string out = c.Push("hello E", &stopped);
  EXPECT_FALSE(stopped);
  EXPECT_EQ(out, "hello ") << "'E' might start a stop string";
  out = c.Push("N", &stopped);
  EXPECT_EQ(out, "");
  out = c.Push("Dmore", &stopped);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "");
}

TEST(StopChecker, ReleasesHeldTextWhenItCannotStop) {
  StopChecker c({"abc"});
  bool stopped = false;
  EXPECT_EQ(c.Push("xab", &stopped), "x");
  EXPECT_EQ(c.Push("d", &stopped), "abd");
  EXPECT_EQ(c.Push("ab", &stopped), "");
  EXPECT_EQ(c.Flush(), "ab");
}

TEST(StopChecker, EarliestStopWins) {
  StopChecker c({"world", "lo"});
  bool stopped = false;
  EXPECT_EQ(c.Push("hello world", &stopped), "hel");
  EXPECT_TRUE(stopped);
}

// include_stop_str_in_output: the text ends with the stop string found (across pieces too); of
// the stops that start where it does, the longest; what followed it in the piece is dropped.
TEST(StopChecker, IncludedStopEndsTheText) {
  StopChecker c({"END", "EN", "lo"}, /*include_stop=*/true);
  bool stopped = false;
  EXPECT_EQ(c.Push("say E", &stopped), "say ");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(c.Push("ND and more", &stopped), "END");
  EXPECT_TRUE(stopped);
  StopChecker early({"world", "lo"}, true);
  EXPECT_EQ(early.Push("hello world", &stopped), "hello");
  EXPECT_TRUE(stopped);
}

TEST(StopChecker, DoesNotSplitUtf8Characters) {
  StopChecker c({"\xc3\xa9x"});  // "éx"
  bool stopped = false;
  EXPECT_EQ(c.Push("a\xc3\xa9", &stopped), "a");
  EXPECT_EQ(c.Push("y", &stopped), "\xc3\xa9y");
}

TEST(StopChecker, NoStopsPassesThrough) {
  StopChecker c({});
  bool stopped = true;
  EXPECT_EQ(c.Push("anything", &stopped), "anything");
  EXPECT_FALSE(stopped);
}

}  // namespace
}  // namespace ls
