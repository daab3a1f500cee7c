// The CPU engine's logits equal the PyTorch reference's on every fixture: a 32-token prefill
// (whole, and in uneven chunks) followed by 16 single-token decode steps through the KV cache.
#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "tests/test_util.h"

namespace ls {
namespace {

// Tolerance by weight dtype, as the engine-core acceptance states.
float LogitTolerance(const std::string& name) { return name.find("f32") != std::string::npos ? 1e-3f : 2e-2f; }

class ReferenceLogits : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceLogits, MatchesPyTorchOverPrefillAndDecode) {
  const std::string dir = testing::FixtureDir(GetParam());
  CpuBackend backend(2);
  auto model = LoadModel(dir, &backend);
  ASSERT_TRUE(model.ok()) << model.status();
  testing::Golden g = testing::LoadGolden(dir);
  ASSERT_EQ(g.prompt_ids.size(), 32u);
  ASSERT_EQ(g.decode_ids.size(), 16u);
  ASSERT_EQ(g.vocab, (*model)->config().vocab_size);
  const float tol = LogitTolerance(GetParam());
  for (const auto& chunks : {std::vector<int>{32}, std::vector<int>{5, 11, 16}}) {
    std::vector<float> got = testing::RunGolden(**model, g, chunks);
    ASSERT_EQ(got.size(), g.logits.size());
    for (size_t row = 0; row < 48; ++row) {
      const float err = testing::MaxAbsDiff(got.data() + row * g.vocab, g.logits.data() + row * g.vocab, g.vocab);
      ASSERT_LE(err, tol) << "position " << row << " with " << chunks.size() << " prefill chunk(s)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReferenceLogits, ::testing::ValuesIn(testing::FixtureNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ls
