// Checkpoints of the published families as Hugging Face transformers saves them (tests/data/hf,
// written by models/reference/hf_fixtures.py) load unchanged and give transformers' own logits:
// the 32-token prompt (whole and in uneven chunks over a scrambled block table) and 16 greedy
// decode steps through the paged KV cache. Float32 checkpoints within 1e-4 relative per row,
// BF16 ones within 2e-2, quantized ones (FP8 blocks, INT4, MXFP4, loaded as saved) within 1e-3 of the
// float32 forward of their dequantized weights; the top token agrees on every row. Fixtures of variants the server
// refuses must fail to load with a message naming what is refused.
#include <gtest/gtest.h>

#include <map>

#include "kernels/cpu/cpu_backend.h"
#include "tests/test_util.h"

namespace ls {
namespace {

// Fixtures the server must refuse, with a fragment of the error.
const std::map<std::string, std::string>& Refused() {
  static const std::map<std::string, std::string> refused = {
      {"qwen3_moe_dynamic_rope_f32", "\"dynamic\" is not supported"},
  };
  return refused;
}

// Quantized checkpoints (fp8, int4, mxfp4 in the name) are compared with the float32 forward of their
// dequantized weights, which the kernels reproduce up to summation order: 1e-3.
bool Quantized(const std::string& name) {
  for (const char* f : {"_fp8", "_int4", "_mxfp4"})
    if (name.find(f) != std::string::npos) return true;
  return false;
}
double Tolerance(const std::string& name) {
  if (Quantized(name)) return 1e-3;
  return name.find("_f32") != std::string::npos ? 1e-4 : 2e-2;
}

class HfFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFixtures, LoadAsSavedAndMatchTransformers) {
  const std::string dir = testing::HfFixtureDir(GetParam());
  CpuBackend backend(2);
  auto model = LoadModel(dir, &backend);
  if (auto it = Refused().find(GetParam()); it != Refused().end()) {
    ASSERT_FALSE(model.ok()) << GetParam() << " must be refused";
    EXPECT_NE(model.status().message().find(it->second), std::string::npos) << model.status();
    return;
  }
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->config().unrecognized_keys.empty())
      << "unrecognized config key: " << (*model)->config().unrecognized_keys[0];
  testing::Golden g = testing::LoadGolden(dir);
  ASSERT_EQ(g.vocab, (*model)->config().vocab_size);
  const double tol = Tolerance(GetParam());
  for (const auto& chunks : {std::vector<int>{32}, std::vector<int>{5, 11, 16}}) {
    const std::vector<float> got = testing::RunGolden(**model, g, chunks);
    ASSERT_EQ(got.size(), g.logits.size());
    const testing::LogitsAgreement a = testing::CompareLogits(got, g.logits, g.vocab);
    EXPECT_LE(a.worst_relative_error, tol) << chunks.size() << " prefill chunk(s)";
    EXPECT_EQ(a.top_agreement, 1.0) << chunks.size() << " prefill chunk(s)";
    std::printf("%s, %zu chunk(s): worst row relative error %.3g, top-1 agreement %.3f\n", GetParam().c_str(),
                chunks.size(), a.worst_relative_error, a.top_agreement);
  }
}

INSTANTIATE_TEST_SUITE_P(Transformers, HfFixtures, ::testing::ValuesIn(testing::HfFixtureNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ls
