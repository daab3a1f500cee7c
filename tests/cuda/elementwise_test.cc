// The CUDA backend's Add and AddBias equal the host sums exactly, its MulSigmoid the CPU
// backend's; the float32 → BF16 conversion the GEMMs share (cuda::ConvertToBf16) equals F32ToBf16
// exactly, halfway cases (round to even) included. Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
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
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  DeviceArray<float> dx(x), dy(y);
  gpu->Add(dx.get(), dy.get(), n);
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

TEST(CudaAddBias, AddsTheBiasOfAnyTypeToEveryRow) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(9);
  const int64_t rows = 37, width = 129;
  const std::vector<float> y = cuda_test::RandomFloats(rows * width, rng), bias = cuda_test::RandomFloats(width, rng);
  std::vector<uint16_t> bias_bf16(width);
  for (int64_t i = 0; i < width; ++i) bias_bf16[i] = F32ToBf16(bias[i]);
  DeviceArray<float> dy(y), dbias(bias);
  DeviceArray<uint16_t> dbias_bf16(bias_bf16);
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  gpu->AddBias(dy.get(), rows, Tensor{dbias.get(), DType::kF32, 1, width});
  gpu->AddBias(dy.get(), rows, Tensor{dbias_bf16.get(), DType::kBF16, 1, width});
  const std::vector<float> got = dy.Download();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < width; ++i)
      ASSERT_EQ(got[r * width + i], (y[r * width + i] + bias[i]) + Bf16ToF32(bias_bf16[i])) << r << " " << i;
}

TEST(CudaMulSigmoid, MatchesTheCpuOpForRowAndElementGates) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(10);
  const int64_t rows = 23, width = 77;
  CpuBackend cpu(1);
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  for (int64_t gate_width : {int64_t{1}, width}) {
    std::vector<float> x = cuda_test::RandomFloats(rows * width, rng), gate = cuda_test::RandomFloats(rows * gate_width, rng, 4.f);
    DeviceArray<float> dx(x), dgate(gate);
    gpu->MulSigmoid(dx.get(), rows, width, dgate.get(), gate_width);
    cpu.MulSigmoid(x.data(), rows, width, gate.data(), gate_width);
    EXPECT_TRUE(cuda_test::AllClose(dx.Download(), x, 1e-7, 1e-6)) << "gate width " << gate_width;
  }
}

}  // namespace
}  // namespace ls
