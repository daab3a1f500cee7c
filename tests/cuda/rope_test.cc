// CUDA RoPE equals the CPU op at positions up to 8191, for several head sizes and bases
// (tolerance 1e-5 relative, 1e-6 absolute: only cos/sin rounding differs). Reports SKIPPED
// without a device.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_ops.h"
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
  };
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> position(0, 8191);
  ThreadPool pool(1);
  for (const Case& c : {Case{5, 24, 10000.f}, Case{3, 128, 1e6f}, Case{7, 6, 500.f}}) {
    const int64_t T = 19;
    std::vector<int32_t> pos(T);
    for (auto& p : pos) p = position(rng);
    pos[0] = 0;
    std::vector<float> x = cuda_test::RandomFloats(T * c.heads * c.head_dim, rng);
    std::vector<float> inv_freq(c.head_dim / 2);
    cuda::RopeInverseFrequencies(c.theta, c.head_dim, inv_freq.data());
    DeviceArray<float> dx(x), dfreq(inv_freq);
    DeviceArray<int32_t> dpos(pos);
    cuda::Rope(dx.get(), T, c.heads, c.head_dim, dpos.get(), dfreq.get(), nullptr);
    cpu::Rope(pool, x.data(), T, c.heads, c.head_dim, pos.data(), c.theta);
    EXPECT_TRUE(AllClose(dx.Download(), x, 1e-6, 1e-5)) << "head_dim " << c.head_dim;
  }
}

}  // namespace
}  // namespace ls
