// The MLA layer's two forms agree: on the MLA layers of transformers-written DeepSeek-V3 (YaRN
// RoPE) and Kimi-Linear (no RoPE) checkpoints and of the K3 reference checkpoint (output gate), a
// 1,100-token sequence over a scrambled block table gives the same outputs, within float rounding,
// through the absorbed form and through the expanded form expanding 256 positions at a time, with a
// float32 and a BF16 cache; a chunked prefill whose chunks the cost rule sends to both forms equals
// one whole prefill; and a sequence's outputs are bit for bit the same alone and in a step beside a
// sequence of the other form.
#include "models/layers/mla_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <ostream>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "models/loader/weight_binder.h"
#include "tests/test_util.h"

namespace ls {
namespace {

struct Fixture {
  const char* param;   // testing::FixtureParamDir's name
  const char* prefix;  // the checkpoint's prefix before "model.layers."
};

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.param; }

class MlaForms : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    auto m = LoadModel(testing::FixtureParamDir(GetParam().param), &backend_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    const ModelConfig& c = model_->config();
    int32_t layer = 0;
    while (layer < c.num_hidden_layers && c.layers[layer].attention != AttentionKind::kMla) ++layer;
    ASSERT_LT(layer, c.num_hidden_layers) << "no MLA layer";
    WeightBinder b(model_->weight_store(), c.quantization, GetParam().prefix);
    layer_ = std::make_unique<MlaAttention>(b, "model.layers." + std::to_string(layer) + ".self_attn.", c);
    ASSERT_TRUE(b.status().ok()) << b.status();
    layer_->ForEachWeight([&](Tensor& t, WeightUse use) {
      const size_t bytes = backend_.PreparedWeightBytes(t, use);
      storage_.emplace_back(&backend_, std::max<size_t>(bytes, 64));
      t = backend_.PrepareWeight(t, use, bytes ? storage_.back().data() : nullptr);
    });
    layer_->WeightsPrepared();
    d_ = c.hidden_size;
  }

  // Runs `chunks` of consecutive tokens of each sequence (inputs h [len, d] per sequence) step by
  // step, one chunk of every sequence per step; returns each sequence's outputs [len, d].
  std::vector<std::vector<float>> Run(const std::vector<std::vector<float>>& h,
                                      const std::vector<std::vector<int>>& chunks, DType dtype) {
    constexpr int32_t kBlock = 16;
    int32_t blocks = 0;
    for (const auto& x : h) blocks += static_cast<int32_t>(x.size() / d_ + kBlock - 1) / kBlock;
    KvCache cache(&backend_, {layer_->kv_spec()}, blocks + 3, kBlock, dtype);
    std::vector<int32_t> pool(blocks + 3);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), std::mt19937(5));
    std::vector<std::vector<int32_t>> tables;
    for (size_t s = 0, next = 0; s < h.size(); ++s) {
      const size_t n = (h[s].size() / d_ + kBlock - 1) / kBlock;
      tables.emplace_back(pool.begin() + next, pool.begin() + next + n);
      next += n;
    }
    std::vector<std::vector<float>> out(h.size());
    for (size_t s = 0; s < h.size(); ++s) out[s].assign(h[s].size(), 0.f);
    StepBuffers buf(&backend_);
    for (size_t step = 0;; ++step) {
      std::vector<AttentionSeq> seqs;
      std::vector<int32_t> positions;
      std::vector<float> in;
      std::vector<size_t> which;
      for (size_t s = 0; s < h.size(); ++s) {
        if (step >= chunks[s].size()) continue;
        int32_t start = 0;
        for (size_t i = 0; i < step; ++i) start += chunks[s][i];
        const int32_t n = chunks[s][step];
        seqs.push_back({static_cast<int32_t>(positions.size()), n, start, tables[s].data(),
                        static_cast<int32_t>(tables[s].size())});
        for (int32_t i = 0; i < n; ++i) positions.push_back(start + i);
        in.insert(in.end(), h[s].begin() + static_cast<int64_t>(start) * d_, h[s].begin() + (start + n) * d_);
        which.push_back(s);
      }
      if (seqs.empty()) break;
      std::vector<float> x(in.size(), 0.f);
      StepContext ctx;
      ctx.backend = &backend_;
      ctx.num_tokens = static_cast<int64_t>(positions.size());
      ctx.positions = positions.data();
      ctx.seqs = &seqs;
      ctx.cache = &cache;
      ctx.buf = &buf;
      layer_->Forward(ctx, 0, in.data(), x.data());
      for (size_t k = 0; k < seqs.size(); ++k)
        std::copy_n(x.begin() + static_cast<int64_t>(seqs[k].token_offset) * d_, seqs[k].num_tokens * d_,
                    out[which[k]].begin() + static_cast<int64_t>(seqs[k].start_pos) * d_);
    }
    return out;
  }

  // Inputs of `len` tokens, large enough that the softmax is far from uniform.
  std::vector<float> Inputs(int len, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 8.f);
    std::vector<float> h(static_cast<size_t>(len) * d_);
    for (float& e : h) e = nd(rng);
    return h;
  }

  // The worst row's relative L2 difference.
  double WorstRow(const std::vector<float>& got, const std::vector<float>& want) const {
    double worst = 0;
    for (size_t r = 0; r < want.size() / d_; ++r) {
      double diff = 0, norm = 0;
      for (int64_t i = 0; i < d_; ++i) {
        const double a = got[r * d_ + i], b = want[r * d_ + i];
        diff += (a - b) * (a - b);
        norm += b * b;
      }
      worst = std::max(worst, std::sqrt(diff / std::max(norm, 1e-30)));
    }
    return worst;
  }

  CpuBackend backend_{2};
  std::unique_ptr<Model> model_;
  std::unique_ptr<MlaAttention> layer_;
  std::vector<DeviceBuffer> storage_;
  int64_t d_ = 0;
};

TEST_P(MlaForms, AbsorbedAndExpandedAgreeOverLongContexts) {
  const std::vector<float> h = Inputs(1100, 1);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    layer_->set_form(MlaForm::kAbsorbed);
    const auto absorbed = Run({h}, {{1100}}, dtype);
    layer_->set_form(MlaForm::kExpanded);
    layer_->set_expand_tile(256);  // five tiles
    const auto expanded = Run({h}, {{1100}}, dtype);
    // A prefill chunk after cached tokens and single-token steps, each form throughout.
    const auto expanded_steps = Run({h}, {{700, 300, 98, 1, 1}}, dtype);
    layer_->set_form(MlaForm::kAbsorbed);
    const auto absorbed_steps = Run({h}, {{700, 300, 98, 1, 1}}, dtype);
    const double worst = WorstRow(expanded[0], absorbed[0]);
    EXPECT_LT(worst, 2e-5) << DTypeName(dtype);
    EXPECT_LT(WorstRow(expanded_steps[0], absorbed_steps[0]), 2e-5) << DTypeName(dtype);
    std::printf("%s, %s cache: worst row relative difference, expanded vs absorbed, %.3g\n", GetParam().param,
                std::string(DTypeName(dtype)).c_str(), worst);
  }
}

TEST_P(MlaForms, ChunkedPrefillMixingFormsEqualsWholePrefill) {
  const std::vector<int> chunks = {600, 3, 1, 250, 1, 245};
  // The cost rule sends these chunks to both forms.
  std::vector<bool> expanded;
  for (int i = 0, start = 0; i < static_cast<int>(chunks.size()); start += chunks[i++])
    expanded.push_back(layer_->ChoosesExpanded(chunks[i], start));
  EXPECT_EQ(expanded, (std::vector<bool>{true, false, false, true, false, true}));
  EXPECT_TRUE(layer_->ChoosesExpanded(1100, 0));
  const std::vector<float> h = Inputs(1100, 2);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const auto whole = Run({h}, {{1100}}, dtype);
    const auto chunked = Run({h}, {chunks}, dtype);
    const double worst = WorstRow(chunked[0], whole[0]);
    EXPECT_LT(worst, 2e-5) << DTypeName(dtype);
    std::printf("%s, %s cache: worst row relative difference, chunked vs whole, %.3g\n", GetParam().param,
                std::string(DTypeName(dtype)).c_str(), worst);
  }
}

TEST_P(MlaForms, SequenceGivesTheSameBitsBesideTheOtherForm) {
  // A long prefill chunk (expanded) beside decodes and a short chunk after cached tokens (absorbed).
  const std::vector<float> a = Inputs(400, 3), b = Inputs(300, 4);
  const std::vector<int> chunks_a = {200, 180, 20}, chunks_b = {100, 1, 199};
  EXPECT_TRUE(layer_->ChoosesExpanded(200, 0));
  EXPECT_TRUE(layer_->ChoosesExpanded(199, 101));
  EXPECT_FALSE(layer_->ChoosesExpanded(20, 380));
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const auto together = Run({a, b}, {chunks_a, chunks_b}, dtype);
    EXPECT_EQ(together[0], Run({a}, {chunks_a}, dtype)[0]) << DTypeName(dtype);
    EXPECT_EQ(together[1], Run({b}, {chunks_b}, dtype)[0]) << DTypeName(dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, MlaForms,
                         ::testing::Values(Fixture{"hf/deepseek_v3_yarn_f32", ""}, Fixture{"hf/kimi_linear_f32", ""},
                                           Fixture{"k3/k3_tiny_bf16", "language_model."}),
                         [](const auto& info) {
                           std::string name = info.param.param;
                           return name.substr(name.find('/') + 1);
                         });

}  // namespace
}  // namespace ls
