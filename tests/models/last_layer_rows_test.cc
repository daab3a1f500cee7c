// The last layer's FFN runs over the rows whose logits a step asks for and no others
// (Model::LastLayerRows): the logits are those of running every row, bit for bit, over every
// layer kind and block shape, and the rows it skips are not routed.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "kernels/cpu/cpu_backend.h"
#include "tests/test_util.h"

namespace ls {
namespace {

struct Step {
  std::vector<int32_t> tokens;
  std::vector<StepSequence> seqs;
};

// Three sequences over four steps: a prompt wanting its last row, a prompt in two chunks (the
// first wanting no logits), a prompt wanting every row; then decode steps, and a step whose only
// sequence wants no logits at all.
std::vector<Step> Steps(int32_t vocab) {
  std::mt19937 rng(11);
  auto ids = [&](int n) {
    std::vector<int32_t> v(n);
    for (int32_t& t : v) t = static_cast<int32_t>(rng() % vocab);
    return v;
  };
  auto seq = [](int32_t slot, int32_t start, int32_t n, bool logits, bool all) {
    StepSequence s;
    s.block_table.resize(8);
    std::iota(s.block_table.begin(), s.block_table.end(), slot * 8);
    s.state_slot = slot;
    s.start_pos = start;
    s.num_tokens = n;
    s.want_logits = logits;
    s.all_logits = all;
    return s;
  };
  std::vector<Step> steps(4);
  steps[0].tokens = ids(9 + 6 + 4);
  steps[0].seqs = {seq(0, 0, 9, true, false), seq(1, 0, 6, false, false), seq(2, 0, 4, true, true)};
  steps[1].tokens = ids(1 + 3 + 1);
  steps[1].seqs = {seq(0, 9, 1, true, false), seq(1, 6, 3, true, false), seq(2, 4, 1, true, false)};
  steps[2].tokens = ids(5);
  steps[2].seqs = {seq(1, 9, 5, false, false)};
  steps[3].tokens = ids(2 + 1);
  steps[3].seqs = {seq(0, 10, 2, true, true), seq(1, 14, 1, true, false)};
  return steps;
}

// Every step's logits, and the tokens the last layer routed in the first step.
std::vector<float> RunSteps(Model& model, bool every_token, int64_t* last_layer_routed) {
  const ModelConfig& c = model.config();
  KvCache cache(model.backend(), model.kv_layout(), 32, 4, DType::kF32, 3);
  model.RouteEveryToken(every_token);
  model.ResetExpertTokenCounts();
  std::vector<float> all, logits;
  bool first = true;
  for (const Step& s : Steps(c.vocab_size)) {
    StepBatch b;
    b.tokens = s.tokens;
    b.seqs = s.seqs;
    EXPECT_TRUE(model.Forward(b, cache, &logits).ok());
    all.insert(all.end(), logits.begin(), logits.end());
    if (first && c.is_moe_layer(c.num_hidden_layers - 1)) {
      const auto at = model.expert_token_counts().begin() + (c.num_hidden_layers - 1) * c.moe.num_experts;
      *last_layer_routed = std::accumulate(at, at + c.moe.num_experts, int64_t{0});
    }
    first = false;
  }
  model.RouteEveryToken(false);
  return all;
}

TEST(LastLayerRows, GiveTheLogitsOfEveryRowAndRouteOnlyThoseRows) {
  // Latent MoE, a dense-only model, MLA with dense first layers, KDA, attention residuals.
  for (const std::string param : {"latent_sigmoid_situ_bf16", "hf/qwen3_moe_f32", "hf/qwen3_f32", "hf/deepseek_v3_f32",
                                  "hf/kimi_linear_f32", "hf/qwen3_moe_mlp_only_bf16", "k3/k3_tiny_bf16"}) {
    SCOPED_TRACE(param);
    CpuBackend backend(2);
    auto model = LoadModel(testing::FixtureParamDir(param), &backend);
    ASSERT_TRUE(model.ok()) << model.status();
    int64_t routed_rows = -1, routed_all = -1;
    const std::vector<float> rows = RunSteps(**model, false, &routed_rows);
    const std::vector<float> every = RunSteps(**model, true, &routed_all);
    ASSERT_EQ(rows.size(), every.size());
    ASSERT_FALSE(rows.empty());
    EXPECT_EQ(testing::MaxAbsDiff(rows.data(), every.data(), rows.size()), 0.f);
    const ModelConfig& c = (*model)->config();
    if (c.is_moe_layer(c.num_hidden_layers - 1)) {
      // The first step: 19 tokens, of which 1 + 0 + 4 want logits.
      EXPECT_EQ(routed_all, 19 * c.moe.top_k);
      EXPECT_EQ(routed_rows, 5 * c.moe.top_k);
    }
  }
}

}  // namespace
}  // namespace ls
