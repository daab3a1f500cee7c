// A checkpoint's multi-token-prediction layer loaded alone (LoadOptions::next_token_layer): over
// the target's final hidden rows (Model::CaptureHidden) and the next tokens it gives the logits of
// models/reference/hf_mtp_fixtures.py, whose block is transformers' own decoder layer; in chunks
// through its own cache as in one pass; and the loader refuses a checkpoint without such a layer
// or with one incomplete, naming what is missing.
#include <gtest/gtest.h>

#include <filesystem>

#include "kernels/cpu/cpu_backend.h"
#include "models/loader/safetensors_writer.h"
#include "models/loader/weight_store.h"
#include "models/registry.h"
#include "tests/test_util.h"
#include "tools/npy.h"

namespace ls {
namespace {

const char* const kFixtures[] = {"deepseek_v3_mtp_f32", "glm4_moe_mtp_f32"};

// The golden sequence (prompt and greedy decode) and the target's hidden rows over it.
struct TargetRun {
  std::vector<int32_t> ids;
  std::vector<float> hidden;  // [L, d]
};

TargetRun RunTarget(Model& target, const testing::Golden& g) {
  TargetRun r;
  r.ids = g.prompt_ids;
  r.ids.insert(r.ids.end(), g.decode_ids.begin(), g.decode_ids.end());
  std::vector<float> logits;
  target.CaptureHidden(&r.hidden);
  EXPECT_TRUE(target.ForwardSequence(r.ids, /*all_logits=*/true, &logits).ok());
  target.CaptureHidden(nullptr);
  // The captured rows are the ones the head reads: the target's logits follow from them.
  EXPECT_EQ(r.hidden.size(), r.ids.size() * static_cast<size_t>(target.config().hidden_size));
  EXPECT_LE(testing::CompareLogits(logits, g.logits, g.vocab).worst_relative_error, 1e-4);
  return r;
}

// The MTP layer's logits for rows [from, to) (row p reads hidden row p and token p + 1), in steps
// of `step` rows through one cache.
std::vector<float> RunMtp(Model& mtp, const TargetRun& t, int32_t from, int32_t to, int32_t step, KvCache& cache) {
  const int64_t d = mtp.config().hidden_size;
  std::vector<float> out, logits;
  for (int32_t p = from; p < to; p += step) {
    const int32_t n = std::min(step, to - p);
    StepBatch b;
    b.tokens.assign(t.ids.begin() + p + 1, t.ids.begin() + p + 1 + n);
    b.prev_hidden.assign(t.hidden.begin() + p * d, t.hidden.begin() + (p + n) * d);
    StepSequence s;
    s.num_tokens = n;
    s.start_pos = p;
    s.all_logits = true;
    for (int32_t i = 0; i < cache.num_blocks(); ++i) s.block_table.push_back(i);
    b.seqs = {s};
    EXPECT_TRUE(mtp.Forward(b, cache, &logits).ok());
    out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

class NextTokenLayer : public ::testing::TestWithParam<const char*> {};

TEST_P(NextTokenLayer, GivesTheReferenceLogitsOverTheTargetsHiddenRows) {
  const std::string dir = testing::HfFixtureDir(GetParam());
  CpuBackend backend(2);
  auto target = LoadModel(dir, &backend);
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ((*target)->config().num_nextn_predict_layers, 1);
  EXPECT_FALSE((*target)->is_next_token_layer());
  auto mtp = LoadModel(dir, &backend, LoadOptions{.next_token_layer = true});
  ASSERT_TRUE(mtp.ok()) << mtp.status();
  ASSERT_TRUE((*mtp)->is_next_token_layer());
  EXPECT_EQ((*mtp)->config().num_hidden_layers, 1);
  EXPECT_TRUE((*mtp)->config().is_moe_layer(0));

  const testing::Golden g = testing::LoadGolden(dir);
  const TargetRun t = RunTarget(**target, g);
  auto want = ReadNpyF32(dir + "/mtp_logits.npy");
  ASSERT_TRUE(want.ok()) << want.status();
  const int32_t rows = static_cast<int32_t>(t.ids.size()) - 1;
  ASSERT_EQ(want->shape.at(0), rows);
  for (int32_t step : {rows, 7, 1}) {
    KvCache cache(&backend, (*mtp)->kv_layout(), 4, 16, DType::kF32);
    const std::vector<float> got = RunMtp(**mtp, t, 0, rows, step, cache);
    const testing::LogitsAgreement a = testing::CompareLogits(got, want->data, g.vocab);
    EXPECT_LE(a.worst_relative_error, 1e-4) << "rows per step " << step;
    EXPECT_EQ(a.top_agreement, 1.0) << "rows per step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Mtp, NextTokenLayer, ::testing::ValuesIn(kFixtures));

TEST(NextTokenLayerLoading, ACheckpointWithoutOneIsRefusedByName) {
  CpuBackend backend(1);
  auto m = LoadModel(testing::HfFixtureDir("deepseek_v3_f32"), &backend, LoadOptions{.next_token_layer = true});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("has no multi-token-prediction layers"), std::string::npos) << m.status();
  auto q = LoadModel(testing::HfFixtureDir("qwen3_moe_f32"), &backend, LoadOptions{.next_token_layer = true});
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("num_nextn_predict_layers"), std::string::npos) << q.status();
}

TEST(NextTokenLayerLoading, AnIncompleteLayerNamesTheMissingTensor) {
  const std::string dir = testing::CopyToTempDir(testing::HfFixtureDir("deepseek_v3_mtp_f32"), "mtp_incomplete");
  {
    SafetensorsWriter w;
    auto store = WeightStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    for (const auto& [n, e] : (*store)->Entries())
      if (n != "model.layers.2.eh_proj.weight")
        w.AddRaw(n, e->shape, e->dtype, std::string(static_cast<const char*>(e->data), e->bytes));
    store->reset();
    ASSERT_TRUE(w.Write(dir + "/model.safetensors").ok());
  }
  CpuBackend backend(1);
  EXPECT_TRUE(LoadModel(dir, &backend).ok()) << "the target alone does not read the layer";
  auto m = LoadModel(dir, &backend, LoadOptions{.next_token_layer = true});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("model.layers.2.eh_proj.weight"), std::string::npos) << m.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ls
