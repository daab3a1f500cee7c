// The CPU backend with the GPU's BF16 rounding of GEMM inputs (tests/bf16_activations_backend.h),
// the reference the CUDA model tests compare with: on every fixture it stays close to the
// PyTorch goldens, and it really rounds (its logits are not the plain CPU backend's).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/bf16_activations_backend.h"
#include "tests/test_util.h"

namespace ls {
namespace {

class Bf16ActivationsLogits : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16ActivationsLogits, StayCloseToGoldens) {
  const std::string dir = testing::FixtureDir(GetParam());
  const testing::Golden g = testing::LoadGolden(dir);
  CpuBackend cpu(2);
  testing::Bf16ActivationsBackend rounding(2);
  auto plain = LoadModel(dir, &cpu);
  auto rounded = LoadModel(dir, &rounding);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(rounded.ok()) << rounded.status();
  const std::vector<int> chunks = {5, 11, 16};
  const std::vector<float> want = testing::RunGolden(**plain, g, chunks);
  const std::vector<float> got = testing::RunGolden(**rounded, g, chunks);
  const auto vs_golden = testing::CompareLogits(got, g.logits, g.vocab);
  const auto vs_cpu = testing::CompareLogits(got, want, g.vocab);
  std::printf("%s: vs golden %.4f (top %.3f), vs cpu %.4f (top %.3f)\n", GetParam().c_str(),
              vs_golden.worst_relative_error, vs_golden.top_agreement, vs_cpu.worst_relative_error,
              vs_cpu.top_agreement);
  // Rounding changes the logits measurably but keeps the model's choices: the same top token on
  // nearly every row. (The relative error itself can be large: on the fixtures with q/k norms a
  // rounded activation sharpens or flattens a softmax, 0.41 at worst.)
  EXPECT_GT(vs_cpu.worst_relative_error, 1e-4);
  EXPECT_GE(vs_golden.top_agreement, 0.95);
  EXPECT_LE(vs_golden.worst_relative_error, 0.5);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Bf16ActivationsLogits, ::testing::ValuesIn(testing::FixtureNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ls
