// A Response's message logprobs: the tokens of the deltas before the first call that add no
// reasoning and no call, the same whether the reply is streamed (ResponseEvents: the text deltas
// carry them, output_text.done has them all) or whole (AppendDelta, ResponseBody); nothing without
// the request's include.
#include <gtest/gtest.h>

#include "server/responses_api.h"
#include "tokenizer/load_tokenizer.h"

namespace ls::server {
namespace {

using ojson = nlohmann::ordered_json;

const std::string kTiny = std::string(LS_TEST_DATA_DIR) + "/../../models/tiny";

Choice Delta(std::string reasoning, std::string text, int32_t token, FinishReason finish = FinishReason::kNone) {
  Choice d;
  d.reasoning = std::move(reasoning);
  d.text = std::move(text);
  d.token_ids = {token};
  d.logprobs = {TokenLogprob{token, -0.5f - static_cast<float>(token) / 1000, {{token, -0.1f}}}};
  d.finish = finish;
  return d;
}

// Reasoning (token 10), its end tag (11: adds nothing), text (12, 13), the end of the sequence (14).
std::vector<Choice> Deltas() {
  return {Delta("Let me see.", "", 10), Delta("", "", 11), Delta("", "Hello", 12), Delta("", " world", 13),
          Delta("", "", 14, FinishReason::kStop)};
}

std::vector<int32_t> Ids(const std::vector<TokenLogprob>& lps) {
  std::vector<int32_t> out;
  for (const auto& lp : lps) out.push_back(lp.token_id);
  return out;
}

// The token texts of an output_text.logprobs list.
std::vector<std::string> Tokens(const ojson& list) {
  std::vector<std::string> out;
  for (const ojson& lp : list) out.push_back(lp["token"].get<std::string>());
  return out;
}

class ResponsesLogprobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = tok::LoadTokenizer(kTiny);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::move(*t);
    ctx_ = std::make_unique<ApiContext>(nullptr, tokenizer_.get(), nullptr, "tiny", "cpu", ApiKeys(), LogLevel::kError);
    parsed_.endpoint = Endpoint::kChat;
    req_.logprobs = true;
  }
  std::vector<std::string> Expected(std::vector<int32_t> ids) const {
    std::vector<TokenLogprob> lps;
    for (int32_t id : ids) lps.push_back(TokenLogprob{id, 0.f, {}});
    return Tokens(TextLogprobs(req_, parsed_, lps, *ctx_));
  }
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  std::unique_ptr<ApiContext> ctx_;
  ParsedRequest parsed_;
  ResponsesRequest req_;
};

TEST_F(ResponsesLogprobsTest, StreamedAndWholeRepliesGiveTheMessageTheSameTokens) {
  Choice whole;
  for (Choice d : Deltas()) AppendDelta(&whole, std::move(d));
  EXPECT_EQ(Ids(whole.text_logprobs), (std::vector<int32_t>{11, 12, 13, 14}));
  EXPECT_EQ(whole.logprobs.size(), 5u);
  const ojson body =
      ResponseBody(req_, "resp_1", 0, "tiny", whole, Usage{}, TextLogprobs(req_, parsed_, whole.text_logprobs, *ctx_));
  ASSERT_EQ(body["output"].size(), 2u);
  const ojson& part = body["output"][1]["content"][0];
  EXPECT_EQ(Tokens(part["logprobs"]), Expected({11, 12, 13, 14}));
  EXPECT_EQ(part["logprobs"][1]["top_logprobs"].size(), 1u);
  EXPECT_EQ(part["logprobs"][1]["bytes"].size(), part["logprobs"][1]["token"].get<std::string>().size());

  ResponseEvents events(req_, parsed_, *ctx_, "resp_2", 0, "tiny");
  std::string stream = events.Start();
  for (const Choice& d : Deltas()) stream += events.Delta(d);
  stream += events.Finish(Usage{});
  std::vector<std::vector<std::string>> deltas;
  ojson done;
  for (size_t at = stream.find("data: "); at != std::string::npos; at = stream.find("data: ", at + 1)) {
    const ojson e = ojson::parse(stream.substr(at + 6, stream.find('\n', at) - at - 6));
    if (e["type"] == "response.output_text.delta") deltas.push_back(Tokens(e["logprobs"]));
    if (e["type"] == "response.output_text.done") done = e;
  }
  // The first text delta brings the end tag's token with its own; the end of the sequence comes at done.
  EXPECT_EQ(deltas, (std::vector<std::vector<std::string>>{Expected({11, 12}), Expected({13})}));
  EXPECT_EQ(Tokens(done["logprobs"]), Expected({11, 12, 13, 14}));
  EXPECT_EQ(events.final_response()["output"][1]["content"][0]["logprobs"], part["logprobs"]);
}

TEST_F(ResponsesLogprobsTest, TokensAfterTheFirstCallAreNotTheMessages) {
  std::vector<Choice> deltas = {Delta("", "Sure.", 20), Delta("", "", 21)};
  Choice call = Delta("", "", 22);
  call.tool_calls.push_back(chat::ToolCallDelta{0, "call_1", "weather", "{}"});
  deltas.push_back(call);
  deltas.push_back(Delta("", "", 23, FinishReason::kStop));
  Choice whole;
  for (Choice d : deltas) AppendDelta(&whole, std::move(d));
  EXPECT_EQ(Ids(whole.text_logprobs), (std::vector<int32_t>{20, 21}));
}

TEST_F(ResponsesLogprobsTest, NothingWithoutTheInclude) {
  req_.logprobs = false;
  Choice whole;
  for (Choice d : Deltas()) AppendDelta(&whole, std::move(d));
  EXPECT_TRUE(TextLogprobs(req_, parsed_, whole.text_logprobs, *ctx_).empty());
  ResponseEvents events(req_, parsed_, *ctx_, "resp_3", 0, "tiny");
  std::string stream = events.Start();
  for (const Choice& d : Deltas()) stream += events.Delta(d);
  stream += events.Finish(Usage{});
  EXPECT_TRUE(events.final_response()["output"][1]["content"][0]["logprobs"].empty());
}

}  // namespace
}  // namespace ls::server
