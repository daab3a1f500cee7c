// ChatReply: a choice's reply read through the chat format's parser and trimmed to what the
// request asks for — calls after the first dropped when parallel_tool_calls is false, reasoning
// dropped when include_reasoning is false — with tool-call deltas in OpenAI's order.
#include "server/chat_reply.h"

#include <gtest/gtest.h>

#include "chat/jinja_chat_format.h"
#include "tokenizer/load_tokenizer.h"

namespace ls::server {
namespace {

using ojson = nlohmann::ordered_json;

const std::string kTiny = std::string(LS_TEST_DATA_DIR) + "/../../models/tiny";
const std::string kTemplate = std::string(LS_TEST_DATA_DIR) + "/../server/data/tools_and_thinking.jinja";

class ChatReplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = tok::LoadTokenizer(kTiny);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::move(*t);
    auto tmpl = chat::ChatTemplate::FromFile(kTemplate, {});
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    format_ = std::make_shared<chat::JinjaChatFormat>(std::move(*tmpl), tokenizer_.get(), &chat::HermesToolCallFormat(),
                                                      /*think=*/true);
    ctx_ = std::make_unique<ApiContext>(nullptr, tokenizer_.get(), format_, "tiny", "cpu", ApiKeys(), LogLevel::kError);
  }
  // The whole reply when the model writes `generated` (fed in 3-byte pieces).
  chat::ChatDelta Reply(const std::string& generated, bool parallel, bool reasoning, bool* made_calls) {
    ChatRequest request;
    request.inputs.messages = ojson::parse(R"([{"role": "user", "content": "Weather?"}])");
    request.inputs.tools = ojson::parse(R"([{"type": "function", "function": {"name": "weather"}}])");
    request.parallel_tool_calls = parallel;
    request.include_reasoning = reasoning;
    ApiError err;
    auto session = RenderChat(*ctx_, std::move(request), &err);
    EXPECT_NE(session, nullptr) << err.message;
    ChatReply reply(session, ctx_.get(), "chatcmpl-test");
    chat::ChatDelta all;
    for (size_t i = 0; i < generated.size(); i += 3) all.Append(reply.Next({}, generated.substr(i, 3), false));
    all.Append(reply.Next({}, "", true));
    *made_calls = reply.made_calls();
    return all;
  }
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  std::shared_ptr<chat::JinjaChatFormat> format_;
  std::unique_ptr<ApiContext> ctx_;
};

constexpr const char* kTwoCalls =
    "Let me look.\n</think>\n\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": "
    "\"Lima\"}}\n</tool_call>\n"
    "<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Quito\"}}\n</tool_call>";

TEST_F(ChatReplyTest, ParallelCallsAndReasoningComeBackApart) {
  bool calls = false;
  const chat::ChatDelta d = Reply(kTwoCalls, true, true, &calls);
  EXPECT_EQ(d.reasoning, "Let me look.\n");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].index, 0);
  EXPECT_EQ(d.tool_calls[1].index, 1);
  EXPECT_EQ(ojson::parse(d.tool_calls[1].arguments), ojson::parse(R"({"city": "Quito"})"));
  EXPECT_FALSE(d.tool_calls[0].id.empty());
  EXPECT_NE(d.tool_calls[0].id, d.tool_calls[1].id);
  EXPECT_TRUE(calls);
}

TEST_F(ChatReplyTest, ParallelToolCallsFalseKeepsOnlyTheFirstCall) {
  bool calls = false;
  const chat::ChatDelta d = Reply(kTwoCalls, false, true, &calls);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(ojson::parse(d.tool_calls[0].arguments), ojson::parse(R"({"city": "Lima"})"));
  EXPECT_TRUE(calls);
}

TEST_F(ChatReplyTest, IncludeReasoningFalseDropsTheReasoning) {
  bool calls = false;
  const chat::ChatDelta d = Reply("hidden thoughts</think>Sunny.", true, false, &calls);
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Sunny.");
  EXPECT_FALSE(calls);
}

TEST_F(ChatReplyTest, AMalformedCallIsContent) {
  bool calls = false;
  const chat::ChatDelta d =
      Reply("</think><tool_call>\n{\"name\": \"weather\", \"arguments\": [1]}\n</tool_call>", true, true, &calls);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_NE(d.content.find("<tool_call>"), std::string::npos) << d.content;
  EXPECT_FALSE(calls);
}

}  // namespace
}  // namespace ls::server
