// Speculative decoding with a draft model: the proposer's cache follows each sequence through
// rejections (a draft after a rejection is the draft of a proposer that never saw the rejected
// tokens), gives its blocks back, and makes room by dropping sequences it was not asked about;
// through the engine, greedy output is token for token the output without speculation (alone,
// batched and under preemption) with a draft that agrees with the target (the same checkpoint)
// and with one that mostly does not (another family); sampled output keeps the distribution of
// the output without speculation (chi-square over many seeds); drafts with recurrent layers are
// refused.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/draft_model_proposer.h"
#include "tests/engine/checkpoint_engine.h"

namespace ls {
namespace {

class DraftModelProposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = LoadModel(testing::FixtureParamDir("hf/qwen3_f32"), &backend_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }
  std::unique_ptr<DraftModelProposer> Make(int32_t blocks) {
    auto p = DraftModelProposer::Create(model_.get(), blocks, 4, DType::kF32, model_->config().vocab_size);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }
  // Drafts of k tokens for each of `seqs` (sequence id i+1) in one call.
  static std::vector<std::vector<int32_t>> Draft(DraftModelProposer& p, const std::vector<std::vector<int32_t>>& seqs,
                                                 int32_t k, absl::Status* status = nullptr) {
    std::vector<std::vector<int32_t>> drafts(seqs.size());
    std::vector<DraftQuery> qs;
    for (size_t i = 0; i < seqs.size(); ++i) qs.push_back({i + 1, &seqs[i], k, &drafts[i]});
    const absl::Status st = p.Propose(qs);
    if (status) *status = st;
    EXPECT_TRUE(st.ok()) << st;
    return drafts;
  }
  std::vector<int32_t> Random(std::mt19937& rng, int n) const {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng() % model_->config().vocab_size);
    return t;
  }

  CpuBackend backend_{2};
  std::unique_ptr<Model> model_;
};

TEST_F(DraftModelProposerTest, DraftsAreGreedyContinuationsOfTheDraftModel) {
  std::mt19937 rng(5);
  const std::vector<int32_t> prompt = Random(rng, 11);
  auto p = Make(64);
  const std::vector<int32_t> draft = Draft(*p, {prompt}, 4)[0];
  ASSERT_EQ(draft.size(), 4u);
  // Each draft token is the argmax of the draft model's logits after the tokens before it.
  std::vector<int32_t> seq = prompt;
  for (int32_t d : draft) {
    std::vector<float> logits;
    ASSERT_TRUE(model_->ForwardSequence(seq, false, &logits).ok());
    EXPECT_EQ(d, std::max_element(logits.begin(), logits.end()) - logits.begin());
    seq.push_back(d);
  }
}

TEST_F(DraftModelProposerTest, AfterARejectionTheDraftIsAFreshProposersDraft) {
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> seqs = {Random(rng, 9), Random(rng, 30), Random(rng, 3)};
  auto p = Make(64);
  for (int round = 0; round < 6; ++round) {
    const auto drafts = Draft(*p, seqs, 3);
    // The target accepts a varying part of each draft and then samples a token of its own.
    for (size_t i = 0; i < seqs.size(); ++i) {
      const size_t take = (round + i) % (drafts[i].size() + 1);
      seqs[i].insert(seqs[i].end(), drafts[i].begin(), drafts[i].begin() + take);
      seqs[i].push_back(static_cast<int32_t>(rng() % model_->config().vocab_size));
    }
    auto fresh = Make(64);
    EXPECT_EQ(Draft(*p, seqs, 3), Draft(*fresh, seqs, 3)) << "round " << round;
  }
  for (uint64_t id = 1; id <= seqs.size(); ++id) p->Forget(id);
  EXPECT_EQ(p->num_free_blocks(), 64) << "every block comes back";
}

TEST_F(DraftModelProposerTest, LongCatchUpRunsInBoundedSteps) {
  std::mt19937 rng(9);
  const std::vector<int32_t> a = Random(rng, DraftModelProposer::kMaxStepTokens + 37), b = Random(rng, 50);
  const int32_t blocks = (DraftModelProposer::kMaxStepTokens + 200) / 4 + 40;
  auto p = Make(blocks);
  auto fresh = Make(blocks);
  EXPECT_EQ(Draft(*p, {a, b}, 2),
            (std::vector<std::vector<int32_t>>{Draft(*fresh, {a}, 2)[0], Draft(*fresh, {b}, 2)[0]}));
}

TEST_F(DraftModelProposerTest, WarmupKeepsNothing) {
  std::mt19937 rng(13);
  const std::vector<int32_t> a = Random(rng, 12), b = Random(rng, 30);
  auto p = Make(700);
  ASSERT_TRUE(p->Warmup(8, 3).ok());
  EXPECT_EQ(p->num_free_blocks(), 700);
  auto fresh = Make(700);
  EXPECT_EQ(Draft(*p, {a, b}, 3), Draft(*fresh, {a, b}, 3));
  EXPECT_TRUE(Make(2)->Warmup(8, 3).ok()) << "a cache too small to warm up in is no error";
}

TEST_F(DraftModelProposerTest, ShortOfBlocksItDropsSequencesNotAskedAbout) {
  std::mt19937 rng(11);
  const std::vector<int32_t> a = Random(rng, 20), b = Random(rng, 20);
  auto p = Make(8);  // 32 tokens: room for one sequence of 20 and its draft
  const auto da = Draft(*p, {a}, 3)[0];
  EXPECT_EQ(da.size(), 3u);
  std::vector<int32_t> db;
  std::vector<DraftQuery> qs = {{2, &b, 3, &db}};
  ASSERT_TRUE(p->Propose(qs).ok());
  EXPECT_EQ(db.size(), 3u) << "sequence 1, not asked about, gave its blocks";
  // Both asked about at once: the second does not fit and goes without a draft.
  std::vector<int32_t> d1, d2;
  qs = {{1, &a, 3, &d1}, {2, &b, 3, &d2}};
  ASSERT_TRUE(p->Propose(qs).ok());
  EXPECT_EQ(d1.size() + d2.size(), 3u);
}

TEST_F(DraftModelProposerTest, ModelsWithRecurrentLayersAreRefused) {
  auto kda = LoadModel(testing::FixtureParamDir("hf/kimi_linear_f32"), &backend_);
  ASSERT_TRUE(kda.ok()) << kda.status();
  auto p = DraftModelProposer::Create(kda->get(), 16, 4, DType::kF32, 256);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("recurrent"), std::string::npos) << p.status();
}

// Parameter: "TARGET|DRAFT", fixture names.
class DraftModelEngine : public CheckpointEngineTest {
 protected:
  void SetUp() override {
    const std::vector<std::string> parts = absl::StrSplit(GetParam(), '|');
    auto m = LoadModel(testing::FixtureParamDir(parts[0]), &backend_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    auto d = LoadModel(testing::FixtureParamDir(parts[1]), &backend_);
    ASSERT_TRUE(d.ok()) << d.status();
    draft_ = std::move(*d);
    same_ = parts[0] == parts[1];
  }
  std::vector<Request> Requests(int count) {
    std::mt19937 rng(17);
    std::vector<Request> reqs;
    for (int i = 0; i < count; ++i) {
      Request r = Req(absl::StrCat("d", i), Prompt(rng, 5 + 3 * i), 9 + 2 * i);
      r.params.logprobs = 1;
      reqs.push_back(std::move(r));
    }
    return reqs;
  }

  std::unique_ptr<Model> draft_;
  bool same_ = false;
};

TEST_P(DraftModelEngine, GreedyOutputIsTheOutputWithout) {
  const std::vector<Request> reqs = Requests(8);
  auto plain = MakeEngine();
  const auto want = RunOutputs(*plain, reqs);
  const int32_t plain_blocks = plain->num_kv_blocks();
  plain.reset();
  EngineConfig cfg;
  cfg.speculative = {3, 1, 4, draft_.get()};
  auto engine = MakeEngine(cfg);
  ASSERT_EQ(engine->num_speculative_tokens(), 3);
  EXPECT_STREQ(engine->speculative_method(), "draft_model");
  EXPECT_LT(engine->num_kv_blocks(), plain_blocks) << "the draft's cache comes out of the same budget";
  std::vector<RequestOutput> alone;
  for (const Request& r : reqs) alone.push_back(RunOutputs(*engine, {r})[0]);
  ExpectSameOutputs(alone, want);
  ExpectSameOutputs(RunOutputs(*engine, reqs), want);
  const MetricsSnapshot m = engine->Metrics();
  EXPECT_EQ(m.spec_method, "draft_model");
  EXPECT_GT(m.spec_steps, 0u);
  EXPECT_LE(m.spec_accepted_tokens, m.spec_draft_tokens);
  EXPECT_EQ(m.spec_propose_errors, 0u);
  if (same_) {
    EXPECT_GT(m.spec_accepted_tokens, m.spec_draft_tokens * 9 / 10) << "a draft that is the target agrees";
  }
  EXPECT_EQ(m.kv_blocks_used, 0);
}

TEST_P(DraftModelEngine, PreemptionKeepsTheOutput) {
  const std::vector<Request> reqs = Requests(8);
  auto plain = MakeEngine();
  const auto want = RunOutputs(*plain, reqs);
  plain.reset();
  EngineConfig cfg;
  cfg.speculative = {2, 1, 4, draft_.get()};
  cfg.num_kv_blocks = 12;  // too few for all at once, here and in the draft's cache
  cfg.enable_prefix_caching = false;
  auto engine = MakeEngine(cfg);
  ExpectSameOutputs(RunOutputs(*engine, reqs), want);
  EXPECT_GT(engine->Metrics().preemptions, 0u);
  EXPECT_EQ(engine->Metrics().kv_blocks_used, 0);
}

// Two-sample chi-square statistic of two count tables over the same cells, cells with fewer than 10
// observations in all pooled into one; *df receives its degrees of freedom.
double ChiSquare(const std::map<std::vector<int32_t>, int>& a, const std::map<std::vector<int32_t>, int>& b, int* df) {
  std::map<std::vector<int32_t>, std::pair<int, int>> cells;
  for (const auto& [k, n] : a) cells[k].first += n;
  for (const auto& [k, n] : b) cells[k].second += n;
  std::vector<std::pair<int, int>> kept;
  std::pair<int, int> rest{0, 0};
  for (const auto& [k, c] : cells)
    if (c.first + c.second >= 10)
      kept.push_back(c);
    else
      rest = {rest.first + c.first, rest.second + c.second};
  if (rest.first + rest.second > 0) kept.push_back(rest);
  double na = 0, nb = 0;
  for (const auto& c : kept) na += c.first, nb += c.second;
  double chi = 0;
  for (const auto& [x, y] : kept) {
    const double pooled = (x + y) / (na + nb);
    chi +=
        (x - na * pooled) * (x - na * pooled) / (na * pooled) + (y - nb * pooled) * (y - nb * pooled) / (nb * pooled);
  }
  *df = static_cast<int>(kept.size()) - 1;
  return chi;
}

// The first three sampled tokens of many seeded requests (temperature 1.5, top-k 5): with the draft
// model speculating from the second token on, their joint distribution is the one without. The
// draft is the target's greedy choice, accepted with its probability and otherwise excluded from
// the draw.
class DraftModelSampling : public DraftModelEngine {};

TEST_P(DraftModelSampling, SampledOutputKeepsTheDistribution) {
  std::mt19937 rng(23);
  const std::vector<int32_t> prompt = Prompt(rng, 7);
  constexpr int kRequests = 3000;
  std::vector<Request> reqs;
  for (int i = 0; i < kRequests; ++i) {
    Request r = Req(absl::StrCat("s", i), prompt, 3);
    r.params.temperature = 1.5f;
    r.params.top_k = 5;
    r.params.seed = 1000 + i;
    reqs.push_back(std::move(r));
  }
  auto count = [&](Engine& engine, std::map<std::vector<int32_t>, int>* first_two,
                   std::map<std::vector<int32_t>, int>* last_two) {
    for (const RequestOutput& o : RunOutputs(engine, reqs)) {
      EXPECT_EQ(o.token_ids.size(), 3u);
      if (o.token_ids.size() != 3) continue;
      ++(*first_two)[{o.token_ids[0], o.token_ids[1]}];
      ++(*last_two)[{o.token_ids[1], o.token_ids[2]}];
    }
  };
  std::map<std::vector<int32_t>, int> plain01, plain12, spec01, spec12;
  EngineConfig cfg;
  cfg.max_waiting = kRequests;
  auto plain = MakeEngine(cfg);
  count(*plain, &plain01, &plain12);
  plain.reset();
  cfg.speculative = {2, 1, 4, draft_.get()};
  auto engine = MakeEngine(cfg);
  count(*engine, &spec01, &spec12);
  const MetricsSnapshot m = engine->Metrics();
  ASSERT_GT(m.spec_steps, kRequests / 2u);
  EXPECT_GT(m.spec_accepted_tokens, m.spec_draft_tokens / 5) << "accepted often";
  EXPECT_LT(m.spec_accepted_tokens, m.spec_draft_tokens * 4 / 5) << "and rejected often";
  // Below the 0.999 quantile of chi-square at its degrees of freedom (Wilson–Hilferty).
  for (auto [a, b] : {std::pair{&plain01, &spec01}, std::pair{&plain12, &spec12}}) {
    int df = 0;
    const double chi = ChiSquare(*a, *b, &df);
    ASSERT_GT(df, 3);
    const double h = 2.0 / (9.0 * df), q999 = df * std::pow(1 - h + 3.0902 * std::sqrt(h), 3);
    EXPECT_LT(chi, q999) << "df " << df;
  }
}

// The target as its own draft: accepted often and rejected often.
INSTANTIATE_TEST_SUITE_P(Pairs, DraftModelSampling, ::testing::Values("hf/qwen3_moe_f32|hf/qwen3_moe_f32"),
                         [](const auto&) { return std::string("qwen3_moe_f32_self"); });

INSTANTIATE_TEST_SUITE_P(Pairs, DraftModelEngine,
                         ::testing::Values("hf/qwen3_moe_f32|hf/qwen3_moe_f32", "hf/qwen3_moe_f32|hf/qwen3_f32",
                                           "hf/deepseek_v3_f32|hf/qwen3_f32", "hf/kimi_linear_f32|hf/qwen3_f32"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '/' || c == '|') c = '_';
                           return name;
                         });

TEST(DraftModelEngineConfig, RecurrentDraftIsRefusedButNotARecurrentTarget) {
  CpuBackend backend(2);
  auto target = LoadModel(testing::FixtureParamDir("hf/qwen3_moe_f32"), &backend);
  auto kda = LoadModel(testing::FixtureParamDir("hf/kimi_linear_f32"), &backend);
  ASSERT_TRUE(target.ok() && kda.ok());
  EngineConfig cfg;
  cfg.kv_cache_dtype = DType::kF32;
  cfg.speculative = {2, 1, 4, kda->get()};
  auto bad = Engine::Create(target->get(), nullptr, cfg);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("recurrent"), std::string::npos) << bad.status();
  cfg.speculative = {2, 1, 4, target->get()};
  auto on = Engine::Create(kda->get(), nullptr, cfg);
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ((*on)->num_speculative_tokens(), 2);
  EXPECT_EQ((*on)->draft_model(), target->get());
}

}  // namespace
}  // namespace ls
