// The cuBLASLt GEMM (BF16 operands, FP32 accumulation) against the CPU GEMM on the same BF16
// weights: relative norm error ≤ 1e-2 (x is rounded to BF16 on the device only), for decode and
// prefill shapes, K whose rows are not 16-byte aligned, accumulation, and outputs at offsets
// that are only 4-byte aligned. Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::DeviceArray;
using cuda_test::RelNormError;

TEST(CudaGemm, MatchesCpuOnTheSameBf16Weights) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::string error;
  auto gemm = cuda::CublasLtGemm::Create(&error);
  ASSERT_NE(gemm, nullptr) << error;
  struct Shape {
    int64_t M, N, K;
  };
  std::mt19937 rng(12);
  CpuBackend cpu(2);
  for (const Shape& s : {Shape{1, 257, 200}, Shape{7, 97, 190}, Shape{130, 1000, 512}, Shape{64, 64, 8}}) {
    for (bool accumulate : {false, true}) {
      const std::vector<float> x = cuda_test::RandomFloats(s.M * s.K, rng);
      const std::vector<uint16_t> w = cuda_test::RandomBf16(s.N * s.K, rng, 0.05f);
      std::vector<float> y = cuda_test::RandomFloats(s.M * s.N, rng);
      DeviceArray<float> dx(x), dy(y);
      DeviceArray<uint16_t> dw(w);
      if (!accumulate) dy.Poison();
      gemm->Run(dx.get(), s.M, Tensor{dw.get(), DType::kBF16, s.N, s.K}, dy.get(), accumulate, nullptr);
      cpu.Gemm(x.data(), s.M, Tensor{w.data(), DType::kBF16, s.N, s.K}, y.data(), accumulate);
      EXPECT_LE(RelNormError(dy.Download(), y), 1e-2)
          << "M " << s.M << " N " << s.N << " K " << s.K << (accumulate ? " accumulate" : "");
    }
  }
}

// Batch invariance: a row's result is the same, bit for bit, whether it is computed alone or
// among many rows (the plan avoids split-K algorithms, whose reduction changes with M).
TEST(CudaGemm, RowResultIndependentOfBatchSize) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::string error;
  auto gemm = cuda::CublasLtGemm::Create(&error);
  ASSERT_NE(gemm, nullptr) << error;
  const int64_t N = 4096, K = 1024;
  std::mt19937 rng(14);
  const std::vector<uint16_t> w = cuda_test::RandomBf16(N * K, rng, 0.05f);
  DeviceArray<uint16_t> dw(w);
  const Tensor wt{dw.get(), DType::kBF16, N, K};
  for (int64_t M : {64, 256}) {
    const std::vector<float> x = cuda_test::RandomFloats(M * K, rng);
    DeviceArray<float> dx(x), all(M * N);
    all.Poison();
    gemm->Run(dx.get(), M, wt, all.get(), false, nullptr);
    const std::vector<float> together = all.Download();
    for (int64_t m : {int64_t{0}, M / 2, M - 1}) {
      DeviceArray<float> row(std::vector<float>(x.begin() + m * K, x.begin() + (m + 1) * K)), one(N);
      one.Poison();
      gemm->Run(row.get(), 1, wt, one.get(), false, nullptr);
      const std::vector<float> alone = one.Download();
      for (int64_t n = 0; n < N; ++n)
        ASSERT_EQ(alone[n], together[m * N + n]) << "M " << M << " row " << m << " col " << n;
    }
  }
}

TEST(CudaGemm, HandlesOperandsAtUnalignedOffsets) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::string error;
  auto gemm = cuda::CublasLtGemm::Create(&error);
  ASSERT_NE(gemm, nullptr) << error;
  const int64_t M = 5, N = 97, K = 190;  // row 1 of y starts 388 bytes in: 4-byte aligned
  std::mt19937 rng(13);
  const std::vector<float> x = cuda_test::RandomFloats((M + 1) * K, rng);
  const std::vector<uint16_t> w = cuda_test::RandomBf16((N + 1) * K, rng, 0.05f);
  DeviceArray<float> dx(x), dy((M + 1) * N);
  DeviceArray<uint16_t> dw(w);
  dy.Poison();
  // Rows 1 .. M of x, of w and of y.
  gemm->Run(dx.get() + K, M, Tensor{dw.get() + K, DType::kBF16, N, K}, dy.get() + N, false, nullptr);
  std::vector<float> ref(M * N);
  CpuBackend cpu(1);
  cpu.Gemm(x.data() + K, M, Tensor{w.data() + K, DType::kBF16, N, K}, ref.data(), false);
  const std::vector<float> all = dy.Download();
  EXPECT_LE(RelNormError(std::vector<float>(all.begin() + N, all.end()), ref), 1e-2);
}

TEST(CudaGemm, Bf16InputsGiveTheSameProduct) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::string error;
  auto gemm = cuda::CublasLtGemm::Create(&error);
  ASSERT_NE(gemm, nullptr) << error;
  const int64_t M = 33, N = 130, K = 256;
  std::mt19937 rng(14);
  const std::vector<uint16_t> xb = cuda_test::RandomBf16(M * K, rng), w = cuda_test::RandomBf16(N * K, rng, 0.05f);
  std::vector<float> x(M * K);
  for (int64_t i = 0; i < M * K; ++i) x[i] = Bf16ToF32(xb[i]);
  DeviceArray<uint16_t> dxb(xb), dw(w);
  DeviceArray<float> dy(M * N);
  dy.Poison();
  gemm->RunBf16(dxb.get(), M, Tensor{dw.get(), DType::kBF16, N, K}, dy.get(), false, nullptr);
  std::vector<float> ref(M * N);
  CpuBackend cpu(1);
  cpu.Gemm(x.data(), M, Tensor{w.data(), DType::kBF16, N, K}, ref.data(), false);
  // Both sides multiply the same BF16 values exactly: only the order and rounding of the float32
  // sums differ.
  EXPECT_LE(RelNormError(dy.Download(), ref), 1e-4);
}

}  // namespace
}  // namespace ls
