// CUDA Add equals the host sum exactly; the float32 → BF16 conversion equals F32ToBf16 exactly,
// halfway cases (round to even) included. Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::DeviceArray;

TEST(CudaAdd, AddsExactly) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t n = 100003;
  std::mt19937 rng(7);
  const std::vector<float> x = cuda_test::RandomFloats(n, rng), y = cuda_test::RandomFloats(n, rng);
  DeviceArray<float> dx(x), dy(y);
  cuda::Add(dx.get(), dy.get(), n, nullptr);
  const std::vector<float> got = dx.Download();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], x[i] + y[i]) << i;
}

TEST(CudaConvertToBf16, RoundsToNearestEvenAsTheHost) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(8);
  std::vector<float> x = cuda_test::RandomFloats(70001, rng, 10.f);
  // Exactly halfway between two BF16 values: 1 + 2^-8 rounds down to 1, 1 + 3·2^-8 up.
  x[0] = 1.00390625f;
  x[1] = 1.01171875f;
  x[2] = -1.00390625f;
  DeviceArray<float> dx(x);
  DeviceArray<uint16_t> dout(x.size());
  dout.Poison();
  cuda::ConvertToBf16(dx.get(), static_cast<int64_t>(x.size()), dout.get(), nullptr);
  const std::vector<uint16_t> got = dout.Download();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], F32ToBf16(x[i])) << i << ": " << x[i];
}

}  // namespace
}  // namespace ls
