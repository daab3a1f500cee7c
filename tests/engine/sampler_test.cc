// Sampler: greedy ties, penalties, truncation (top-k, top-p, min-p) restricting the support,
// seeded determinism, raw logprobs, and NaN logits (never chosen; a row of them gives no token).
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

namespace ls {
namespace {

TEST(Sampler, GreedyTakesArgmaxWithLowestIdOnTies) {
  std::vector<float> l = {0.f, 3.f, 1.f, 3.f};
  SamplingParams p;
  p.temperature = 0;
  std::mt19937_64 rng(1);
  EXPECT_EQ(Sampler::Sample(l.data(), 4, p, {0}, 1, &rng).token_id, 1);
}

TEST(Sampler, PenaltiesFollowTheirDefinitions) {
  std::vector<float> l = {2.f, -2.f, 1.f, 1.f};
  SamplingParams p;
  p.repetition_penalty = 2.f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  // Prompt {0, 1}; output {2, 2}.
  Sampler::ApplyPenalties(l.data(), 4, p, {0, 1, 2, 2}, 2);
  EXPECT_FLOAT_EQ(l[0], 1.f);                  // positive / 2
  EXPECT_FLOAT_EQ(l[1], -4.f);                 // negative * 2
  EXPECT_FLOAT_EQ(l[2], 0.5f - 0.5f - 0.5f);   // /2, then presence and 2 × frequency
  EXPECT_FLOAT_EQ(l[3], 1.f);
}

std::set<int32_t> Support(const std::vector<float>& logits, SamplingParams p, int draws = 400) {
  std::set<int32_t> seen;
  std::mt19937_64 rng(7);
  for (int i = 0; i < draws; ++i) {
    std::vector<float> l = logits;
    seen.insert(Sampler::Sample(l.data(), static_cast<int32_t>(l.size()), p, {0}, 1, &rng).token_id);
  }
  return seen;
}

TEST(Sampler, TruncationRestrictsTheSupport) {
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  EXPECT_EQ(Support(l, p).size(), 4u);
  p.top_k = 2;
  EXPECT_EQ(Support(l, p), (std::set<int32_t>{0, 1}));
  p.top_k = 0;
  p.top_p = 0.79f;
  EXPECT_EQ(Support(l, p), (std::set<int32_t>{0, 1}));
  p.top_p = 0.81f;
  EXPECT_EQ(Support(l, p), (std::set<int32_t>{0, 1, 2}));
  p.top_p = 1.f;
  p.min_p = 0.5f;  // keep p >= 0.25
  EXPECT_EQ(Support(l, p), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, SameSeedSameTokens) {
  std::vector<float> base(50);
  for (int i = 0; i < 50; ++i) base[i] = std::sin(i * 1.7f);
  SamplingParams p;
  p.temperature = 0.9f;
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 30; ++i) {
    std::vector<float> x = base, y = base;
    EXPECT_EQ(Sampler::Sample(x.data(), 50, p, {0}, 1, &a).token_id, Sampler::Sample(y.data(), 50, p, {0}, 1, &b).token_id);
  }
}

TEST(Sampler, LogprobsAreRawLogSoftmax) {
  std::vector<float> l = {1.f, 2.f, 3.f};
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 2;
  p.repetition_penalty = 5.f;  // does not affect the reported logprobs
  std::mt19937_64 rng(1);
  SampleResult r = Sampler::Sample(l.data(), 3, p, {2}, 1, &rng);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  ASSERT_TRUE(r.has_logprobs);
  ASSERT_EQ(r.logprob.top.size(), 2u);
  EXPECT_EQ(r.logprob.top[0].first, 2);
  EXPECT_NEAR(r.logprob.top[0].second, 3.0 - lse, 1e-5);
  EXPECT_EQ(r.logprob.top[1].first, 1);
  EXPECT_NEAR(r.logprob.logprob, l[r.token_id] == 0 ? 0 : r.logprob.logprob, 1e-9);
  EXPECT_NEAR(r.logprob.logprob, (r.token_id + 1.0) - lse, 1e-5);
}

// A NaN logit (a broken weight row) is a token that cannot be chosen: sampling with truncation
// (whose sort needs a strict order, which NaN breaks), greedy and the logprobs all leave it out,
// and the logprobs are numbers over the rest. A row with nothing but NaN gives no token (−1).
TEST(Sampler, NanLogitsAreNeverChosenAndARowOfThemGivesNoToken) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> l(64);
  for (int i = 0; i < 64; ++i) l[i] = std::sin(i * 0.37f);
  for (int i : {0, 5, 17, 40}) l[i] = nan;
  SamplingParams p;
  p.top_p = 0.95f;
  p.logprobs = 3;
  std::mt19937_64 rng(3);
  std::set<int32_t> seen;
  for (int i = 0; i < 300; ++i) {
    std::vector<float> x = l;
    const SampleResult r = Sampler::Sample(x.data(), 64, p, {1}, 1, &rng);
    seen.insert(r.token_id);
    ASSERT_TRUE(std::isfinite(r.logprob.logprob)) << r.token_id;
    for (const auto& [id, lp] : r.logprob.top) EXPECT_TRUE(std::isfinite(lp)) << id;
  }
  for (int nan_id : {0, 5, 17, 40}) EXPECT_EQ(seen.count(nan_id), 0u) << nan_id;
  EXPECT_GT(seen.size(), 5u);
  p.temperature = 0;
  std::vector<float> g = l;
  g[5] = nan;
  EXPECT_EQ(Sampler::Sample(g.data(), 64, p, {1}, 1, &rng).token_id, Sampler::Argmax(l.data(), 64));
  for (const bool greedy : {true, false}) {
    std::vector<float> all(64, nan);
    p.temperature = greedy ? 0.f : 1.f;
    EXPECT_EQ(Sampler::Sample(all.data(), 64, p, {1}, 1, &rng).token_id, -1);
  }
  // The greedy record of such a row (ArgmaxRows: id −1) gives no token either, draft or not.
  const float record[2] = {-1.f, nan};
  EXPECT_EQ(Sampler::FromGreedyRecord(record, p, -1).token_id, -1);
  EXPECT_FALSE(Sampler::FromGreedyRecord(record, p, -1).accepted);
}

// allowed_token_ids: only they can be chosen, greedy or sampled (here against much likelier
// tokens); the logprobs stay the model's; an id outside the vocabulary is refused by name.
TEST(Sampler, OnlyAllowedTokensAreChosen) {
  std::vector<float> l(32);
  for (int i = 0; i < 32; ++i) l[i] = 0.1f * static_cast<float>(i);  // 31 the likeliest
  SamplingParams p;
  p.allowed_token_ids = {3, 7, 9};
  p.logprobs = 1;
  std::mt19937_64 rng(5);
  std::set<int32_t> seen;
  for (int i = 0; i < 200; ++i) {
    std::vector<float> x = l;
    const SampleResult r = Sampler::Sample(x.data(), 32, p, {0}, 1, &rng);
    seen.insert(r.token_id);
    EXPECT_EQ(r.logprob.top[0].first, 31) << "the model's own distribution";
  }
  EXPECT_EQ(seen, (std::set<int32_t>{3, 7, 9}));
  p.temperature = 0;
  std::vector<float> g = l;
  EXPECT_EQ(Sampler::Sample(g.data(), 32, p, {0}, 1, &rng).token_id, 9);
  p.allowed_token_ids = {3, 40};
  const absl::Status st = p.Validate(32, 20);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("allowed_token_ids: id 40 is outside the vocabulary"), std::string::npos) << st;
}

// bad_words: a one-token word is never chosen; a longer one's last token only where the output so
// far ends with the rest of it (the prompt does not count).
TEST(Sampler, BadWordsAreNeverCompleted) {
  std::vector<float> l(16, 0.f);
  l[5] = 10.f;  // the likeliest
  SamplingParams p;
  p.temperature = 0;
  p.bad_words_ids = {{5}};
  std::mt19937_64 rng(1);
  std::vector<float> x = l;
  EXPECT_NE(Sampler::Sample(x.data(), 16, p, {0}, 1, &rng).token_id, 5);
  p.bad_words_ids = {{7, 8, 5}};
  x = l;
  EXPECT_EQ(Sampler::Sample(x.data(), 16, p, {0, 7, 8}, 3, &rng).token_id, 5) << "7 8 are the prompt's";
  x = l;
  EXPECT_EQ(Sampler::Sample(x.data(), 16, p, {0, 7, 8}, 2, &rng).token_id, 5) << "7 is the prompt's";
  x = l;
  EXPECT_NE(Sampler::Sample(x.data(), 16, p, {0, 7, 8}, 1, &rng).token_id, 5) << "the output ends with 7 8";
  x = l;
  EXPECT_EQ(Sampler::Sample(x.data(), 16, p, {0, 8, 8}, 1, &rng).token_id, 5);
  p.bad_words_ids = {{3, 99}};
  EXPECT_FALSE(p.Validate(16, 20).ok());
}

TEST(SamplingParams, ValidationNamesTheField) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_EQ(p.Validate(10).message(), "temperature must be >= 0, got -1");
  p = {};
  p.top_p = 1.5f;
  EXPECT_NE(p.Validate(10).message().find("top_p"), std::string::npos);
  p = {};
  p.max_tokens = 0;
  EXPECT_NE(p.Validate(10).message().find("max_tokens"), std::string::npos);
  p = {};
  p.stop_token_ids = {10};
  EXPECT_NE(p.Validate(10).message().find("stop_token_ids"), std::string::npos);
  p = {};
  p.logprobs = 50;
  EXPECT_NE(p.Validate(10).message().find("logprobs"), std::string::npos);
}

}  // namespace
}  // namespace ls
