// Urlencoded forms and query strings: escapes decoded, a malformed escape refused, a field found
// by its whole name among empty pieces.
#include "server/form_values.h"

#include <gtest/gtest.h>

namespace ls::server {
namespace {

TEST(FormDecodeTest, PlusIsASpaceAndPercentEscapesAreBytes) {
  EXPECT_EQ(FormDecode("a+b%2Bc%3d%E2%82%AC"), "a b+c=\xE2\x82\xAC");
  EXPECT_EQ(FormDecode(""), "");
  EXPECT_FALSE(FormDecode("%"));
  EXPECT_FALSE(FormDecode("ab%4"));
  EXPECT_FALSE(FormDecode("%g0"));
}

TEST(FormValueTest, FindsAFieldByItsWholeName) {
  EXPECT_EQ(FormValue("x=1&key=a%26b&y", "key"), "a&b");
  EXPECT_EQ(FormValue("key", "key"), "");
  EXPECT_FALSE(FormValue("keys=1", "key"));
  EXPECT_EQ(FormValue("&&limit=5&&", "limit"), "5");
  EXPECT_EQ(FormValue("order=asc&order=desc", "order"), "asc");  // the first
  EXPECT_FALSE(FormValue("after=%zz", "after"));
  EXPECT_FALSE(FormValue("", "key"));
}

}  // namespace
}  // namespace ls::server
