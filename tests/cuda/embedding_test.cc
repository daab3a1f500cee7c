// The CUDA backend's embedding lookup equals the CPU backend's exactly for F32, BF16 and F16 tables
// (a conversion to float32 is exact). Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::DeviceArray;

TEST(CudaEmbedding, CopiesRowsExactlyForEveryTableDtype) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t V = 101, d = 333, T = 37;
  std::mt19937 rng(4);
  std::uniform_int_distribution<int32_t> id(0, V - 1);
  std::vector<int32_t> ids(T);
  for (auto& i : ids) i = id(rng);
  ids[0] = V - 1;  // the last row too
  CpuBackend cpu(1);
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const std::vector<float> values = cuda_test::RandomFloats(V * d, rng);
    std::vector<unsigned char> table(V * d * DTypeSize(dtype));
    for (int64_t i = 0; i < V * d; ++i) {
      if (dtype == DType::kF32) {
        std::memcpy(&table[i * 4], &values[i], 4);
      } else {
        const uint16_t h = dtype == DType::kBF16 ? F32ToBf16(values[i]) : F32ToF16(values[i]);
        std::memcpy(&table[i * 2], &h, 2);
      }
    }
    std::vector<float> ref(T * d);
    cpu.Embedding(ids.data(), T, Tensor{table.data(), dtype, V, d}, ref.data());
    DeviceArray<unsigned char> dtable(table);
    DeviceArray<float> dout(T * d);
    dout.Poison();
    gpu->Embedding(ids.data(), T, Tensor{dtable.get(), dtype, V, d}, dout.get());  // ids: host memory
    const std::vector<float> got = dout.Download();
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0) << DTypeName(dtype);
  }
}

}  // namespace
}  // namespace ls
