// The chat formats each model family names (Family::tool_call_format, reasoning_format) are ones
// the chat layer serves, so that the server's "auto" parsers never meet an unknown name.
#include <gtest/gtest.h>

#include "chat/tool_call_format.h"
#include "models/families/family.h"

namespace ls {
namespace {

TEST(FamilyChatFormats, EveryFamilyNamesAServedFormat) {
  for (const Family* f : Families()) {
    const std::string& tools = f->tool_call_format;
    EXPECT_TRUE(tools.empty() || tools == "xtml" || chat::FindToolCallFormat(tools) != nullptr)
        << f->name << ": tool_call_format '" << tools << "'";
    const std::string& reasoning = f->reasoning_format;
    EXPECT_TRUE(reasoning.empty() || reasoning == "think" || reasoning == "none" || reasoning == "xtml")
        << f->name << ": reasoning_format '" << reasoning << "'";
    // XTML is one chat: its tool calls and its reasoning come together.
    EXPECT_EQ(tools == "xtml", reasoning == "xtml") << f->name;
  }
}

}  // namespace
}  // namespace ls
