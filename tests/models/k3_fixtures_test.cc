// Kimi K3 checkpoints as released (tests/data/k3, written by models/reference/k3_fixtures.py):
// the wrapper config and the language_model. tensors load as saved, the vision tower is skipped,
// and the logits match our PyTorch reference (models/reference/k3_reference.py, itself checked
// against transformers' kimi_linear, fla and compressed-tensors): the 32-token prompt whole and in
// uneven chunks, then 16 decode steps through the KDA state slots and the MLA latent cache.
// The reference runs float32 math on the stored values; the bound is 1e-4 absolute per logit (the
// fixtures' README: float64 and float32 references differ by ~2e-5) and the top token everywhere.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "tests/test_util.h"

namespace ls {
namespace {

class K3Fixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(K3Fixtures, LoadAsReleasedAndMatchTheReference) {
  const std::string dir = testing::K3FixtureDir(GetParam());
  CpuBackend backend(2);
  auto model = LoadModel(dir, &backend);
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.family, "Kimi-K3");
  EXPECT_TRUE(c.unrecognized_keys.empty()) << "unrecognized config key: " << c.unrecognized_keys[0];
  EXPECT_EQ(c.attn_res_block_size, 2);
  EXPECT_EQ(c.max_position_embeddings, 4096) << "max_length is a generation key, not the context";
  const AttentionKind K = AttentionKind::kKda, M = AttentionKind::kMla;
  const std::vector<AttentionKind> kinds = {K, K, M, K, K, M};
  for (int32_t l = 0; l < c.num_hidden_layers; ++l) EXPECT_EQ(c.layers[l].attention, kinds[l]) << "layer " << l;
  EXPECT_EQ(c.layers[0].ffn, FfnKind::kDense);
  EXPECT_EQ(c.moe.latent_size, 32);
  EXPECT_TRUE(c.moe.expert_output_norm);
  EXPECT_TRUE(c.mla.output_gate);
  EXPECT_FALSE(c.mla.use_rope);
  EXPECT_EQ(c.kda.gate, KdaGate::kBoundedSigmoid);
  EXPECT_EQ(c.hidden_act.kind, Activation::kSiTU);
  EXPECT_EQ(c.hidden_act.beta, 4.f);
  EXPECT_EQ(c.hidden_act.linear_beta, 25.f);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{6002});

  testing::Golden g = testing::LoadGolden(dir);
  ASSERT_EQ(g.vocab, c.vocab_size);
  for (const auto& chunks : {std::vector<int>{32}, std::vector<int>{5, 11, 16}, std::vector<int>{1, 30, 1}}) {
    const std::vector<float> got = testing::RunGolden(**model, g, chunks);
    ASSERT_EQ(got.size(), g.logits.size());
    const float worst = testing::MaxAbsDiff(got.data(), g.logits.data(), got.size());
    const testing::LogitsAgreement a = testing::CompareLogits(got, g.logits, g.vocab);
    EXPECT_LE(worst, 1e-4f) << chunks.size() << " prefill chunk(s)";
    EXPECT_LE(a.worst_relative_error, 1e-3) << "(non-finite logits count as 1e30)";
    EXPECT_EQ(a.top_agreement, 1.0) << chunks.size() << " prefill chunk(s)";
    std::printf("%s, %zu chunk(s): max |logit difference| %.3g, worst row relative error %.3g\n",
                GetParam().c_str(), chunks.size(), worst, a.worst_relative_error);
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, K3Fixtures, ::testing::ValuesIn(testing::K3FixtureNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ls
