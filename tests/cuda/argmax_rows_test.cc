// ArgmaxRows on the CUDA backend at vocabulary sizes: the ids equal the CPU backend's exactly
// (ties to the first column, NaN never chosen, a maximum in the last column), the
// log-probabilities to float rounding. Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

// ids and log-probabilities of `rows` rows of x on `be` (null logprob: ids only).
void Reduce(Backend& be, const std::vector<float>& x, int64_t rows, int64_t cols, bool logprob,
            std::vector<int32_t>* ids, std::vector<float>* lp) {
  void* dx = be.Allocate(x.size() * sizeof(float));
  void* dids = be.Allocate(static_cast<size_t>(rows) * sizeof(int32_t));
  void* dlp = be.Allocate(static_cast<size_t>(rows) * sizeof(float));
  be.CopyToDevice(dx, x.data(), x.size() * sizeof(float));
  be.ArgmaxRows(static_cast<const float*>(dx), rows, cols, static_cast<int32_t*>(dids),
                logprob ? static_cast<float*>(dlp) : nullptr);
  ids->assign(static_cast<size_t>(rows), -1);
  lp->assign(static_cast<size_t>(rows), 0.f);
  be.CopyToHost(ids->data(), dids, ids->size() * sizeof(int32_t));
  if (logprob) be.CopyToHost(lp->data(), dlp, lp->size() * sizeof(float));
  for (void* p : {dx, dids, dlp}) be.Free(p);
}

TEST(CudaArgmaxRows, EqualsTheCpuBackendAtVocabularySizes) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  CpuBackend cpu(2);
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
      for (int64_t c = 0; c < cols; ++c) x[5 * cols + c] = std::numeric_limits<float>::quiet_NaN();  // no id: −1
    }
    for (const bool logprob : {true, false}) {
      std::vector<int32_t> want_ids, ids;
      std::vector<float> want_lp, lp;
      Reduce(cpu, x, rows, cols, logprob, &want_ids, &want_lp);
      Reduce(*gpu, x, rows, cols, logprob, &ids, &lp);
      ASSERT_EQ(ids, want_ids) << "cols " << cols;
      for (int64_t r = 0; logprob && r < rows; ++r) {
        if (r == 5 && cols > 1) continue;  // no id: NaN on both (NaN elsewhere is left out of the sum)
        EXPECT_NEAR(lp[r], want_lp[r], 1e-4 * (1 + std::fabs(want_lp[r]))) << "cols " << cols << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace ls
