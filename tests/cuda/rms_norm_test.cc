// CUDA RMSNorm equals the CPU op (tolerance 1e-5 relative). Reports SKIPPED without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_ops.h"

namespace ls {
namespace {

TEST(CudaRmsNorm, MatchesCpu) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 37, width = 1000;
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  std::vector<float> x(rows * width);
  std::vector<uint16_t> w(width);
  for (auto& v : x) v = nd(rng);
  for (auto& v : w) v = F32ToBf16(1.f + 0.1f * nd(rng));
  ThreadPool pool(1);
  std::vector<float> ref(rows * width), got(rows * width);
  cpu::RmsNorm(pool, x.data(), rows, Tensor{w.data(), DType::kBF16, 1, width}, 1e-6f, ref.data());
  float *dx, *dout;
  void* dw;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dw, w.size() * 2), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice);
  cuda::RmsNorm(dx, rows, Tensor{dw, DType::kBF16, 1, width}, 1e-6f, dout, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5f * (1.f + std::fabs(ref[i]))) << i;
  cudaFree(dx);
  cudaFree(dout);
  cudaFree(dw);
}

}  // namespace
}  // namespace ls
