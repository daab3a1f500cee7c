// Think-tag reasoning: what goes to reasoning_content and what to content, whole and streamed,
// on its own and wrapped around a tool-call parser.
#include "chat/think_tag_parser.h"

#include <gtest/gtest.h>

#include "chat/tool_call_format.h"
#include "tests/chat/parser_test_util.h"

namespace ls::chat {
namespace {

std::unique_ptr<ChatOutputParser> Think(bool in_reasoning) {
  return std::make_unique<ThinkTagParser>(std::make_unique<ContentParser>(), in_reasoning);
}

struct Case {
  const char* name;
  bool in_reasoning;  // the prompt opened <think>
  std::string output;
  std::string reasoning, content;
};

TEST(ThinkTagParserTest, SplitsReasoningFromTheReplyWholeAndStreamed) {
  const Case cases[] = {
      {"model opens and closes", false, "<think>\nLet me see.\n</think>\n\nThe answer is 4.", "\nLet me see.\n",
       "The answer is 4."},
      {"space before the tag", false, "\n <think>a</think>b", "a", "b"},
      {"prompt opened it", true, "Step one.</think>Done.", "Step one.", "Done."},
      {"no reasoning", false, "Just an answer.", "", "Just an answer."},
      {"reply keeps its spaces without reasoning", false, "  indented", "", "  indented"},
      {"a tag later in the reply is content", false, "Use <think> tags.", "", "Use <think> tags."},
      {"cut off while thinking", false, "<think>still going", "still going", ""},
      {"cut off in a prompt-opened block", true, "hmm", "hmm", ""},
      {"empty reasoning", false, "<think></think>Hi", "", "Hi"},
      {"a closing tag in the reply stays", false, "<think>r</think>a</think>b", "r", "a</think>b"},
      {"prefix of the tag that is not it", false, "<thinking>x", "", "<thinking>x"},
  };
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    std::vector<std::vector<std::string>> splits = {{c.output}, Bytes(c.output)};
    for (int k = 0; k < 4; ++k) splits.push_back(RandomPieces(c.output, &rng));
    for (const auto& pieces : splits) {
      const Reply r = Parse(Think(c.in_reasoning), pieces);
      EXPECT_EQ(r.delta.reasoning, c.reasoning) << c.name;
      EXPECT_EQ(r.delta.content, c.content) << c.name;
      EXPECT_EQ(r.warning, "") << c.name;
    }
  }
}

TEST(ThinkTagParserTest, WrapsAToolCallParser) {
  const std::string out =
      "<think>The user wants weather; call the tool.</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  for (const auto& pieces : {std::vector<std::string>{out}, Bytes(out)}) {
    auto p = std::make_unique<ThinkTagParser>(HermesToolCallFormat().NewParser(CountingIds()), false);
    const Reply r = Parse(std::move(p), pieces);
    EXPECT_EQ(r.delta.reasoning, "The user wants weather; call the tool.");
    EXPECT_EQ(r.delta.content, "");
    ASSERT_EQ(r.delta.tool_calls.size(), 1u);
    EXPECT_EQ(r.delta.tool_calls[0].name, "get_weather");
    EXPECT_EQ(r.delta.tool_calls[0].arguments, R"({"city":"Paris"})");
  }
  // A call written inside the reasoning is reasoning, not a call.
  auto p = std::make_unique<ThinkTagParser>(HermesToolCallFormat().NewParser(CountingIds()), false);
  const Reply r = Parse(std::move(p), {"<think>maybe <tool_call>{\"name\": \"f\"}</tool_call></think>no call"});
  EXPECT_TRUE(r.delta.tool_calls.empty());
  EXPECT_EQ(r.delta.content, "no call");
  EXPECT_EQ(r.delta.reasoning, "maybe <tool_call>{\"name\": \"f\"}</tool_call>");
}

TEST(ThinkTagParserTest, InnerWarningsSurface) {
  auto p = std::make_unique<ThinkTagParser>(HermesToolCallFormat().NewParser(CountingIds()), false);
  const Reply r = Parse(std::move(p), {"<think>x</think><tool_call>oops</tool_call>"});
  EXPECT_EQ(r.delta.content, "<tool_call>oops</tool_call>");
  EXPECT_NE(r.warning, "");
}

TEST(ThinkTagParserTest, ReasoningTokensStreamAsTheyCome) {
  auto p = Think(false);
  EXPECT_TRUE(p->Feed(1, "<thi").empty()) << "undecided: could be the tag";
  EXPECT_EQ(p->Feed(2, "nk>Plan").reasoning, "Plan");
  EXPECT_EQ(p->Feed(3, " more</").reasoning, " more");
  ChatDelta d = p->Feed(4, "think>\n");
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(p->Feed(5, "Answer").content, "Answer");
}

TEST(ThinkTagParserTest, PromptOpensThinkLooksAtTheLastTag) {
  EXPECT_TRUE(PromptOpensThink("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(PromptOpensThink("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(PromptOpensThink("no tags"));
  EXPECT_TRUE(PromptOpensThink("<think>a</think> later <think>"));
}

}  // namespace
}  // namespace ls::chat
