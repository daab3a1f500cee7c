// CUDA ArgmaxRows at vocabulary sizes: the ids equal the CPU twin's exactly (ties to the first
// column, NaN never chosen, a maximum in the last column), the log-probabilities to float
// rounding. Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::DeviceArray;

TEST(CudaArgmaxRows, EqualsTheCpuAtVocabularySizes) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  ThreadPool pool(2);
  std::mt19937 rng(11);
  for (const int64_t cols : {int64_t{1}, int64_t{511}, int64_t{32000}, int64_t{151936}, int64_t{163840}}) {
    const int64_t rows = 67;
    std::vector<float> x = cuda_test::RandomFloats(rows * cols, rng, 8.f);
    if (cols > 1) {
      x[1 * cols + cols - 1] = 100.f;                             // the last column
      x[2 * cols + cols / 2] = x[2 * cols + cols / 3] = 90.f;     // a tie: the first wins
      x[3 * cols + 0] = std::numeric_limits<float>::quiet_NaN();  // NaN never wins
      x[3 * cols + 1] = 95.f;
      for (int64_t c = 0; c < cols; ++c) x[4 * cols + c] = -2.5f;  // all equal
    }
    std::vector<int32_t> want_ids(rows);
    std::vector<float> want_lp(rows);
    cpu::ArgmaxRows(pool, x.data(), rows, cols, want_ids.data(), want_lp.data());
    DeviceArray<float> dx(x), dlp(rows);
    DeviceArray<int32_t> dids(rows);
    dids.Poison();
    cuda::ArgmaxRows(dx.get(), rows, cols, dids.get(), dlp.get(), nullptr);
    const std::vector<int32_t> ids = dids.Download();
    const std::vector<float> lp = dlp.Download();
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(ids[r], want_ids[r]) << "cols " << cols << " row " << r;
      if (r == 3 && cols > 1) continue;  // NaN in the row: its log-sum-exp is NaN on both
      EXPECT_NEAR(lp[r], want_lp[r], 1e-4 * (1 + std::fabs(want_lp[r]))) << "cols " << cols << " row " << r;
    }
    // Without log-probabilities: the same ids.
    dids.Poison();
    cuda::ArgmaxRows(dx.get(), rows, cols, dids.get(), nullptr, nullptr);
    EXPECT_EQ(dids.Download(), want_ids) << "cols " << cols;
  }
}

}  // namespace
}  // namespace ls
