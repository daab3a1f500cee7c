// The CUDA combine of expert outputs equals the CPU op: the backend's op, and the kernel with a row
// map as the MoE op's last stage launches it (tolerance 1e-5 relative, 1e-6 absolute). Reports
// SKIPPED without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::AllClose;
using cuda_test::DeviceArray;

TEST(CudaCombineExpertOutputs, MatchesCpuWithAndWithoutRowMap) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t T = 37, width = 1001;
  const int32_t K = 5;
  std::mt19937 rng(9);
  const std::vector<float> y = cuda_test::RandomFloats(T * K * width, rng);
  const std::vector<float> w = cuda_test::RandomFloats(T * K, rng, 0.5f);
  std::vector<int64_t> rows(T * K);
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), rng);
  const std::vector<int32_t> rows32(rows.begin(), rows.end());
  ThreadPool pool(1);
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  DeviceArray<float> dy(y), dw(w), dout(T * width);
  DeviceArray<int32_t> drows(rows32);
  for (bool mapped : {false, true}) {
    std::vector<float> ref(T * width);
    cpu::CombineExpertOutputs(pool, y.data(), mapped ? rows.data() : nullptr, w.data(), T, K, width, ref.data());
    dout.Poison();
    if (mapped) {  // the form the MoE op's last stage launches
      cuda::CombineExpertOutputs(dy.get(), drows.get(), dw.get(), T, K, width, dout.get(), nullptr);
    } else {
      gpu->CombineExpertOutputs(dy.get(), dw.get(), T, K, width, dout.get());
    }
    EXPECT_TRUE(AllClose(dout.Download(), ref, 1e-6, 1e-5)) << (mapped ? "row map" : "no row map");
  }
}

}  // namespace
}  // namespace ls
