// A generation request's tally: usage over prompts and choices (cached tokens once per prompt,
// completion tokens only when generating), latencies as the slowest choice's, and which outputs
// are failures (engine errors 500, the server's own cancellations 503, a client's none).
#include "server/request_tally.h"

#include <gtest/gtest.h>

namespace ls::server {
namespace {

RequestOutput Final(FinishReason reason, int32_t completion, int32_t cached, double queue, double ttft,
                    std::string error = "") {
  RequestOutput o;
  o.finish_reason = reason;
  o.completion_tokens = completion;
  o.cached_prompt_tokens = cached;
  o.queue_seconds = queue;
  o.ttft_seconds = ttft;
  o.error = std::move(error);
  return o;
}

TEST(RequestTallyTest, AddsUpTwoPromptsOfTwoChoicesEach) {
  ParsedRequest r;
  r.endpoint = Endpoint::kCompletions;
  r.prompts = {{1, 2, 3}, {4, 5}};
  r.n = 2;
  RequestTally t(r, "cmpl-1");
  EXPECT_EQ(t.usage.prompt_tokens, 5);
  EXPECT_EQ(t.log.id, "cmpl-1");
  EXPECT_EQ(t.log.endpoint, "completions");
  EXPECT_EQ(t.log.prompt_tokens, 5);
  // Choices 0 and 1 are prompt 0's, 2 and 3 prompt 1's; each prompt's cached tokens count once.
  t.Finished(1, Final(FinishReason::kLength, 4, 2, 0.5, 0.7));
  t.Finished(0, Final(FinishReason::kStop, 3, 2, 0.1, 0.2));
  EXPECT_FALSE(t.all_finished());
  t.Finished(3, Final(FinishReason::kStop, 1, 1, 0.3, 0.9));
  t.Finished(2, Final(FinishReason::kLength, 6, 1, 0.2, 0.4));
  EXPECT_TRUE(t.all_finished());
  EXPECT_EQ(t.usage.completion_tokens, 14);
  EXPECT_EQ(t.usage.cached_tokens, 3);
  EXPECT_EQ(t.log.output_tokens, 14);
  EXPECT_DOUBLE_EQ(t.log.queue_s, 0.5);
  EXPECT_DOUBLE_EQ(t.log.ttft_s, 0.9);
  EXPECT_FALSE(t.failure);
}

TEST(RequestTallyTest, EchoWithoutGenerationCountsNoCompletionTokens) {
  ParsedRequest r;
  r.endpoint = Endpoint::kChat;
  r.prompts = {{1, 2}};
  r.generate = false;
  RequestTally t(r, "chatcmpl-2");
  EXPECT_EQ(t.log.endpoint, "chat");
  t.Finished(0, Final(FinishReason::kLength, 1, 0, 0, 0));
  EXPECT_EQ(t.usage.completion_tokens, 0);
}

TEST(RequestTallyTest, EngineErrorsAndServerCancellationsFailButAClientsCancelDoesNot) {
  EXPECT_FALSE(RequestTally::FailureOf(Final(FinishReason::kStop, 1, 0, 0, 0)));
  EXPECT_FALSE(RequestTally::FailureOf(Final(FinishReason::kCancelled, 1, 0, 0, 0)));
  auto e = RequestTally::FailureOf(Final(FinishReason::kError, 1, 0, 0, 0, "out of KV blocks"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 500);
  EXPECT_EQ(e->type, "server_error");
  EXPECT_EQ(e->message, "out of KV blocks");
  e = RequestTally::FailureOf(Final(FinishReason::kCancelled, 1, 0, 0, 0, "the server is shutting down"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 503);
  EXPECT_EQ(e->type, "service_unavailable");

  ParsedRequest r;
  r.prompts = {{1}};
  r.n = 2;
  RequestTally t(r, "cmpl-3");
  t.Finished(0, Final(FinishReason::kError, 0, 0, 0, 0, "kernel failed"));
  t.Finished(1, Final(FinishReason::kStop, 2, 0, 0, 0));
  ASSERT_TRUE(t.failure) << "one failing choice fails the request";
  EXPECT_EQ(t.failure->http_status, 500);
}

}  // namespace
}  // namespace ls::server
