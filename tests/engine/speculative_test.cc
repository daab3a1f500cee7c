// Speculative decoding by n-gram lookup: the proposer's lookup; greedy output token for token the
// output without speculation (with logprobs, batching, stop tokens, max_tokens, preemption and the
// prefix cache) on checkpoints of this project's format, GQA, MLA, and with recurrent (KDA) layers,
// whose state is taken back after a rejection (Kimi-Linear, K3); the sampler's verification leaves
// the sampled distribution unchanged (chi-square) and a seeded request's tokens too (alone,
// batched, preempted); the spare state slots come out of the budget.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "engine/ngram_proposer.h"
#include "engine/sampler.h"
#include "tests/engine/checkpoint_engine.h"

namespace ls {
namespace {

TEST(NgramProposer, ContinuesTheLatestEarlierOccurrenceOfTheLongestSuffix) {
  // "5 6 7" occurs at 0 and 6; the suffix "6 7" last occurred at 7: propose what followed it.
  EXPECT_EQ(ProposeNgram({5, 6, 7, 8, 9, 1, 5, 6, 7, 2, 3, 6, 7}, 1, 3, 4), (std::vector<int32_t>{2, 3, 6, 7}));
  EXPECT_EQ(ProposeNgram({1, 2, 3, 1, 2}, 1, 3, 2), (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(ProposeNgram({1, 2, 3, 1, 2}, 1, 3, 9), (std::vector<int32_t>{3, 1, 2})) << "as many as follow";
  EXPECT_TRUE(ProposeNgram({1, 2, 3, 4}, 1, 3, 3).empty()) << "nothing recurs";
  EXPECT_TRUE(ProposeNgram({1, 2, 3, 1}, 2, 3, 3).empty()) << "a 1-gram is below min_n";
  EXPECT_TRUE(ProposeNgram({1, 2, 1, 2}, 1, 3, 0).empty());
}

// The sampler tests' distribution: six tokens' logits.
constexpr int32_t kVocab = 6;
const std::vector<float> kLogits = {1.0f, 0.2f, -0.5f, 2.0f, 0.7f, -3.0f};

// With a draft, the sampled token's distribution is the one without: the draft is accepted with its
// probability and otherwise excluded from the draw.
TEST(SpeculativeSampler, VerificationKeepsTheDistribution) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  const int n = 40000;
  for (int32_t draft : {3, 1, 5}) {
    std::map<int32_t, int> plain, spec;
    int accepted = 0;
    std::mt19937_64 rng_a(1), rng_b(2);
    for (int i = 0; i < n; ++i) {
      std::vector<float> a = kLogits, b = kLogits;
      ++plain[Sampler::Sample(a.data(), kVocab, p, {}, 0, &rng_a).token_id];
      const SampleResult r = Sampler::Sample(b.data(), kVocab, p, {}, 0, &rng_b, draft);
      ++spec[r.token_id];
      accepted += r.accepted;
      EXPECT_EQ(r.accepted, r.token_id == draft);
    }
    // Chi-square of the speculative counts against the plain ones' frequencies (two samples, df <= 5):
    // 20.5 is the 0.999 quantile at df 5.
    double chi = 0;
    for (int32_t v = 0; v < kVocab; ++v) {
      const double e = (plain[v] + spec[v]) / 2.0;
      if (e > 0) chi += 2 * (plain[v] - e) * (plain[v] - e) / e;
    }
    EXPECT_LT(chi, 20.5) << "draft " << draft;
    EXPECT_NEAR(static_cast<double>(accepted) / n, static_cast<double>(plain[draft]) / n, 0.02) << "draft " << draft;
  }
  // Greedy accepts exactly the argmax.
  std::vector<float> g = kLogits;
  SamplingParams greedy;
  greedy.temperature = 0;
  std::mt19937_64 rng(3);
  EXPECT_TRUE(Sampler::Sample(g.data(), kVocab, greedy, {}, 0, &rng, 3).accepted);
  g = kLogits;
  EXPECT_FALSE(Sampler::Sample(g.data(), kVocab, greedy, {}, 0, &rng, 0).accepted);
}

// A draft changes neither the token drawn nor the random stream after it: from the same stream,
// with and without a draft, the same token and the same next draw (the property that keeps a
// seeded request's tokens whether a step speculated or not).
TEST(SpeculativeSampler, ADraftLeavesTheTokenAndTheStream) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 5;
  for (int32_t draft : {3, 1, 5, 0}) {
    int accepted = 0, rejected = 0;
    for (uint64_t seed = 0; seed < 400; ++seed) {
      std::mt19937_64 plain_rng(seed), spec_rng(seed);
      std::vector<float> a = kLogits, b = kLogits;
      const SampleResult plain = Sampler::Sample(a.data(), kVocab, p, {}, 0, &plain_rng);
      const SampleResult spec = Sampler::Sample(b.data(), kVocab, p, {}, 0, &spec_rng, draft);
      ASSERT_EQ(spec.token_id, plain.token_id) << "draft " << draft << ", seed " << seed;
      ASSERT_EQ(spec.accepted, spec.token_id == draft);
      ASSERT_EQ(spec_rng(), plain_rng()) << "draft " << draft << ", seed " << seed;
      (spec.accepted ? accepted : rejected)++;
    }
    if (draft != 5) {  // 5 is cut by top-k
      EXPECT_GT(accepted, 0) << "draft " << draft;
    }
    EXPECT_GT(rejected, 0) << "draft " << draft;
  }
}

class Speculative : public CheckpointEngineTest {
 protected:
  // Prompts whose continuation the n-gram lookup can guess: a phrase, the model's own greedy
  // continuation of it, and the phrase again.
  std::vector<Request> Requests(int count) {
    std::mt19937 rng(31);
    std::vector<Request> reqs;
    auto plain = MakeEngine();
    for (int i = 0; i < count; ++i) {
      const std::vector<int32_t> phrase = Prompt(rng, 6 + i % 5);
      const RequestOutput first = RunOutputs(*plain, {Req(absl::StrCat("w", i), phrase, 12)})[0];
      std::vector<int32_t> prompt = phrase;
      prompt.insert(prompt.end(), first.token_ids.begin(), first.token_ids.end());
      prompt.insert(prompt.end(), phrase.begin(), phrase.end());
      Request r = Req(absl::StrCat("s", i), prompt, 10 + 3 * i);
      r.params.logprobs = 1;
      if (i % 4 == 3) r.params.stop_token_ids = {first.token_ids[4]};  // ends inside an accepted draft
      reqs.push_back(std::move(r));
    }
    return reqs;
  }
  // The outputs of `reqs` without speculation.
  std::vector<RequestOutput> Plain(const std::vector<Request>& reqs) {
    auto plain = MakeEngine();
    return RunOutputs(*plain, reqs);
  }
  // Expects `want` from an engine proposing up to 4 tokens: one request at a time, then all
  // batched (sequences with and without a draft in one step). Returns its metrics.
  MetricsSnapshot ExpectAloneAndBatched(const std::vector<Request>& reqs, const std::vector<RequestOutput>& want) {
    EngineConfig cfg;
    cfg.speculative = {4, 1, 4};
    auto engine = MakeEngine(cfg);
    EXPECT_EQ(engine->num_speculative_tokens(), 4);
    std::vector<RequestOutput> alone;
    for (const Request& r : reqs) alone.push_back(RunOutputs(*engine, {r})[0]);
    ExpectSameOutputs(alone, want);
    ExpectSameOutputs(RunOutputs(*engine, reqs), want);
    return engine->Metrics();
  }
  // Expects `want` from an engine proposing up to 3 tokens with too few blocks for all at once.
  void ExpectPreempted(const std::vector<Request>& reqs, const std::vector<RequestOutput>& want) {
    EngineConfig cfg;
    cfg.speculative = {3, 2, 3};
    cfg.num_kv_blocks = 12;
    cfg.enable_prefix_caching = false;
    auto engine = MakeEngine(cfg);
    ExpectSameOutputs(RunOutputs(*engine, reqs), want);
    EXPECT_GT(engine->Metrics().preemptions, 0u);
    EXPECT_EQ(engine->Metrics().kv_blocks_used, 0);
  }
};

TEST_P(Speculative, GreedyOutputIsTheOutputWithout) {
  const std::vector<Request> reqs = Requests(12);
  const MetricsSnapshot m = ExpectAloneAndBatched(reqs, Plain(reqs));
  EXPECT_GT(m.spec_steps, 0u);
  // The repeated phrase's continuation is proposed and accepted; K3's tiny random model does not
  // repeat a continuation in another context, so there every draft is rejected (and its state taken back).
  if (GetParam() != "k3/k3_tiny_bf16") {
    EXPECT_GT(m.spec_accepted_tokens, 0u) << "the repeated phrase's continuation is proposed and accepted";
  }
  EXPECT_LT(m.spec_accepted_tokens, m.spec_draft_tokens) << "and some of a draft rejected";
  EXPECT_EQ(m.kv_blocks_used, 0);
}

TEST_P(Speculative, PreemptionKeepsTheOutput) {
  const std::vector<Request> reqs = Requests(8);
  ExpectPreempted(reqs, Plain(reqs));
}

// Seeded sampling gives the tokens it gives without speculation — alone, batched (sequences with
// and without a draft in a step) and under preemption — as the sampler draws once per token.
TEST_P(Speculative, SeededSamplingIsTheOutputWithout) {
  std::vector<Request> reqs = Requests(8);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].params.temperature = i % 2 ? 0.9f : 0.05f;  // near-greedy ones accept drafts on these flat models
    reqs[i].params.top_p = 0.95f;
    reqs[i].params.seed = 100 + i;
  }
  const std::vector<RequestOutput> want = Plain(reqs);
  const MetricsSnapshot m = ExpectAloneAndBatched(reqs, want);
  // Drafts are proposed and some accepted, except where these random models' sampled text does
  // not repeat itself: K3's proposes nothing, Kimi-Linear's nothing that is drawn.
  if (GetParam() != "k3/k3_tiny_bf16") {
    EXPECT_GT(m.spec_draft_tokens, m.spec_accepted_tokens);
  }
  if (GetParam() != "k3/k3_tiny_bf16" && GetParam() != "hf/kimi_linear_f32") {
    EXPECT_GT(m.spec_accepted_tokens, 0u);
  }
  ExpectPreempted(reqs, want);
}

// Greedy rows reduced by the model to their argmax (EngineConfig::greedy_on_backend), with and
// without drafts, give the tokens and log-probabilities of full rows sampled on the host; requests
// that need the whole row (alternatives asked for, a penalty) get it in the same steps.
TEST_P(Speculative, GreedyRecordsGiveTheOutputOfFullRows) {
  std::vector<Request> reqs = Requests(9);
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (i % 3 == 0) reqs[i].params.logprobs = 0;  // the chosen token's only: a record
    if (i % 3 == 1) reqs[i].params.logprobs.reset();
    if (i == 5) reqs[i].params.repetition_penalty = 1.3f;
  }
  EngineConfig host_rows;
  host_rows.greedy_on_backend = false;
  auto plain = MakeEngine(host_rows);
  const auto want = RunOutputs(*plain, reqs);
  plain.reset();
  for (const int32_t k : {0, 4}) {
    EngineConfig cfg;
    if (k > 0) cfg.speculative = {k, 1, 4};
    auto engine = MakeEngine(cfg);
    const auto got = RunOutputs(*engine, reqs);
    ExpectSameOutputs(got, want);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size()) << "request " << i;
      for (size_t j = 0; j < got[i].logprobs.size(); ++j) {
        const auto &a = got[i].logprobs[j].top, &b = want[i].logprobs[j].top;
        ASSERT_EQ(a.size(), b.size()) << "request " << i << " token " << j;
        for (size_t n = 0; n < a.size(); ++n) EXPECT_EQ(a[n].first, b[n].first) << "request " << i << " token " << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, Speculative,
                         ::testing::Values("latent_sigmoid_situ_bf16", "hf/qwen3_moe_f32", "hf/deepseek_v3_f32",
                                           "hf/kimi_linear_f32", "k3/k3_tiny_bf16"),
                         [](const auto& info) {
                           const std::string& p = info.param;
                           return p.find('/') == std::string::npos ? p : p.substr(3);
                         });

class SpeculativeRecurrent : public CheckpointEngineTest {};

// The spare state slots come out of the same budget as the KV blocks; bad lookup sizes are refused.
TEST_P(SpeculativeRecurrent, SpareStateSlotsComeOutOfTheBudget) {
  auto plain = MakeEngine();
  EngineConfig cfg;
  cfg.speculative = {4, 1, 4};
  auto engine = MakeEngine(cfg);
  EXPECT_EQ(engine->num_speculative_tokens(), 4);
  EXPECT_EQ(engine->num_state_slots(), plain->num_state_slots());
  EXPECT_LT(engine->num_kv_blocks(), plain->num_kv_blocks());
  cfg.speculative = {4, 3, 2};
  cfg.kv_cache_dtype = DType::kF32;
  auto bad = Engine::Create(model_.get(), nullptr, cfg);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("prompt_lookup_min"), std::string::npos) << bad.status();
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, SpeculativeRecurrent, ::testing::Values("hf/kimi_linear_f32"),
                         [](const auto& info) { return info.param.substr(3); });

}  // namespace
}  // namespace ls
