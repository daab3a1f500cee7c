// The CUDA backend's RoPE equals the CPU backend's at positions up to 8191, for several head sizes,
// bases, partial rotary dims, both pair conventions and an attention scaling (tolerance 1e-5
// relative, 1e-6 absolute: only cos/sin rounding differs). Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::AllClose;
using cuda_test::DeviceArray;

TEST(CudaRope, MatchesCpuAtLargePositions) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  struct Case {
    int32_t heads, head_dim;
    float theta;
    int32_t rotary_dim;
    bool interleaved;
    float scaling;
  };
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> position(0, 8191);
  CpuBackend cpu(1);
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  for (const Case& c : {Case{5, 24, 10000.f, 24, false, 1.f}, Case{3, 128, 1e6f, 128, false, 1.f},
                        Case{7, 6, 500.f, 6, false, 1.f}, Case{4, 128, 10000.f, 64, false, 1.f},
                        Case{2, 64, 10000.f, 64, true, 1.25f}, Case{3, 192, 50000.f, 64, true, 0.8f}}) {
    const int64_t T = 19;
    std::vector<int32_t> pos(T);
    for (auto& p : pos) p = position(rng);
    pos[0] = 0;
    std::vector<float> x = cuda_test::RandomFloats(T * c.heads * c.head_dim, rng);
    std::vector<float> inv_freq(c.rotary_dim / 2);
    for (int32_t i = 0; i < c.rotary_dim / 2; ++i)
      inv_freq[i] = 1.0f / std::pow(c.theta, static_cast<float>(2 * i) / static_cast<float>(c.rotary_dim));
    const RopeParams p{c.heads, c.head_dim, c.rotary_dim, c.interleaved, inv_freq.data(), c.scaling};
    DeviceArray<float> dx(x);
    gpu->Rope(dx.get(), T, pos.data(), p);  // positions and frequencies: host memory
    cpu.Rope(x.data(), T, pos.data(), p);
    EXPECT_TRUE(AllClose(dx.Download(), x, 1e-6, 1e-5)) << "head_dim " << c.head_dim << " rotary " << c.rotary_dim;
  }
}

}  // namespace
}  // namespace ls
