// The CUDA backend's RMSNorm equals the CPU backend's for F32, BF16 and F16 weights (tolerance
// 1e-5 relative, 1e-6 absolute), in place too. Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::AllClose;
using cuda_test::DeviceArray;

// Host weights of `width` values near 1 stored as `dtype`, as raw bytes.
std::vector<unsigned char> Weights(DType dtype, int64_t width, std::mt19937& rng) {
  const std::vector<float> w = cuda_test::RandomFloats(width, rng, 0.1f);
  std::vector<unsigned char> bytes(width * DTypeSize(dtype));
  for (int64_t i = 0; i < width; ++i) {
    const float v = 1.f + w[i];
    if (dtype == DType::kF32) {
      std::memcpy(&bytes[i * 4], &v, 4);
    } else {
      const uint16_t h = dtype == DType::kBF16 ? F32ToBf16(v) : F32ToF16(v);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  return bytes;
}

TEST(CudaRmsNorm, MatchesCpuForEveryWeightDtype) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 37, width = 1000;
  std::mt19937 rng(2);
  CpuBackend cpu(1);
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const std::vector<float> x = cuda_test::RandomFloats(rows * width, rng);
    const std::vector<unsigned char> w = Weights(dtype, width, rng);
    std::vector<float> ref(rows * width);
    cpu.RmsNorm(x.data(), rows, Tensor{w.data(), dtype, 1, width}, 1e-6f, ref.data());
    DeviceArray<float> dx(x), dout(x.size());
    DeviceArray<unsigned char> dw(w);
    dout.Poison();
    gpu->RmsNorm(dx.get(), rows, Tensor{dw.get(), dtype, 1, width}, 1e-6f, dout.get());
    EXPECT_TRUE(AllClose(dout.Download(), ref, 1e-6, 1e-5)) << DTypeName(dtype);
  }
}

TEST(CudaRmsNorm, WorksInPlaceOnNarrowRows) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 301, width = 12;  // e.g. a per-head q/k norm
  std::mt19937 rng(3);
  CpuBackend cpu(1);
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  const std::vector<float> x = cuda_test::RandomFloats(rows * width, rng, 3.f);
  const std::vector<unsigned char> w = Weights(DType::kBF16, width, rng);
  std::vector<float> ref(rows * width);
  cpu.RmsNorm(x.data(), rows, Tensor{w.data(), DType::kBF16, 1, width}, 1e-5f, ref.data());
  DeviceArray<float> dx(x);
  DeviceArray<unsigned char> dw(w);
  gpu->RmsNorm(dx.get(), rows, Tensor{dw.get(), DType::kBF16, 1, width}, 1e-5f, dx.get());
  EXPECT_TRUE(AllClose(dx.Download(), ref, 1e-6, 1e-5));
}

}  // namespace
}  // namespace ls
