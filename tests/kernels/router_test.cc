// Router: biased selection with ties to the lower index, unbiased normalised weights.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace ls::cpu {
namespace {

TEST(SelectTopK, TiesGoToLowerIndex) {
  const float s[6] = {0.5f, 0.7f, 0.5f, 0.7f, 0.1f, 0.5f};
  int32_t ids[3];
  SelectTopK(s, nullptr, 6, 3, ids);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 0);
}

TEST(SelectTopK, AllEqualPicksFirstK) {
  const float s[5] = {0.f, 0.f, 0.f, 0.f, 0.f};
  int32_t ids[4];
  SelectTopK(s, nullptr, 5, 4, ids);
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 4), (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(Router, BiasSelectsButWeightsAreUnbiased) {
  ThreadPool pool(1);
  // Sigmoid scores; expert 3 has the lowest score but a large bias.
  const float logits[4] = {2.f, 1.f, 0.f, -1.f};
  const float bias[4] = {0.f, 0.f, 0.f, 5.f};
  int32_t ids[2];
  float w[2];
  RouterParams p;
  p.logits = logits;
  p.bias = bias;
  p.num_tokens = 1;
  p.num_experts = 4;
  p.top_k = 2;
  p.scoring = ScoringFunc::kSigmoid;
  p.norm_topk_prob = true;
  p.routed_scaling_factor = 2.f;
  p.topk_ids = ids;
  p.topk_weights = w;
  Router(pool, p);
  EXPECT_EQ(ids[0], 3);
  EXPECT_EQ(ids[1], 0);
  const float s3 = 1.f / (1.f + std::exp(1.f)), s0 = 1.f / (1.f + std::exp(-2.f));
  EXPECT_NEAR(w[0], 2.f * s3 / (s3 + s0), 1e-6);
  EXPECT_NEAR(w[1], 2.f * s0 / (s3 + s0), 1e-6);
}

TEST(Router, SoftmaxWithoutNormalisation) {
  ThreadPool pool(1);
  const float logits[3] = {1.f, 2.f, 3.f};
  int32_t ids[1];
  float w[1];
  RouterParams p;
  p.logits = logits;
  p.num_tokens = 1;
  p.num_experts = 3;
  p.top_k = 1;
  p.scoring = ScoringFunc::kSoftmax;
  p.norm_topk_prob = false;
  p.topk_ids = ids;
  p.topk_weights = w;
  Router(pool, p);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_EQ(ids[0], 2);
  EXPECT_NEAR(w[0], std::exp(3.0) / z, 1e-6);
}

// Group-limited routing: 8 experts in 4 groups of 2. Groups rank by the sum of their two keys;
// with topk_group 2 only groups 1 and 3 are eligible, so expert 0 (the single best key) is not
// chosen; the weights stay the unbiased scores.
TEST(Router, GroupLimitedSelectionSkipsExpertsOfLosingGroups) {
  ThreadPool pool(1);
  // Sigmoid of these logits; group sums (no bias): g0 = σ(3)+σ(-3), g1 = σ(1)+σ(1),
  // g2 = σ(0)+σ(-1), g3 = σ(2)+σ(0.5).
  const float logits[8] = {3.f, -3.f, 1.f, 1.f, 0.f, -1.f, 2.f, 0.5f};
  int32_t ids[3];
  float w[3];
  RouterParams p;
  p.logits = logits;
  p.num_tokens = 1;
  p.num_experts = 8;
  p.top_k = 3;
  p.scoring = ScoringFunc::kSigmoid;
  p.n_group = 4;
  p.topk_group = 2;
  p.norm_topk_prob = false;
  p.topk_ids = ids;
  p.topk_weights = w;
  Router(pool, p);
  EXPECT_EQ(ids[0], 6);
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(ids[2], 3);
  EXPECT_NEAR(w[0], 1.f / (1.f + std::exp(-2.f)), 1e-6);
  // Without the group limit, expert 0 wins.
  p.n_group = 1;
  p.topk_group = 1;
  Router(pool, p);
  EXPECT_EQ(ids[0], 0);
}

// The bias takes part in ranking groups: a large bias on expert 5 lifts group 2 into the top two.
TEST(Router, GroupRankUsesBiasedKeys) {
  ThreadPool pool(1);
  const float logits[8] = {3.f, -3.f, 1.f, 1.f, 0.f, -1.f, 2.f, 0.5f};
  const float bias[8] = {0, 0, 0, 0, 0, 3.f, 0, 0};
  int32_t ids[2];
  float w[2];
  RouterParams p;
  p.logits = logits;
  p.bias = bias;
  p.num_tokens = 1;
  p.num_experts = 8;
  p.top_k = 2;
  p.scoring = ScoringFunc::kSigmoid;
  p.n_group = 4;
  p.topk_group = 1;
  p.topk_ids = ids;
  p.topk_weights = w;
  Router(pool, p);
  EXPECT_EQ(ids[0], 5);
  EXPECT_EQ(ids[1], 4);
}

}  // namespace
}  // namespace ls::cpu
