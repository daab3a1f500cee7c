// GEMM dispatch (AVX-512 when the CPU has it, else portable) and the portable kernel.
#include "kernels/cpu/gemm.h"

#include <algorithm>

#include "kernels/cpu/packed_gemm.h"

namespace ls::cpu {
namespace internal {

void GemmRangeScalar(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin,
                     int64_t n_end, float* y, int64_t ldy, bool accumulate) {
  const int64_t K = w.cols;
  for (int64_t n = n_begin; n < n_end; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      // 16 partial sums, as the vector kernel keeps, to stay close to its rounding.
      float part[16] = {};
      const float* xr = x + m * ldx;
      for (int64_t k = 0; k < K; ++k) part[k % 16] += xr[k] * LoadAsF32(w.data, w.dtype, n * K + k);
      float s = 0.f;
      for (float p : part) s += p;
      float& out = y[m * ldy + (n - n_begin)];
      out = accumulate ? out + s : s;
    }
  }
}

}  // namespace internal

namespace {
const bool kUseAvx512 = internal::CpuHasAvx512();
}

bool GemmUsesAvx512() { return kUseAvx512; }

void GemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin,
               int64_t n_end, float* y, int64_t ldy, bool accumulate) {
  if (w.layout == Layout::kPanels) {
    PackedGemmRange(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
  } else if (kUseAvx512) {
    internal::GemmRangeAvx512(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
  } else {
    internal::GemmRangeScalar(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
  }
}

void Gemm(ThreadPool& pool, const float* x, int64_t M, const Tensor& w, float* y, bool accumulate) {
  const int64_t N = w.rows, K = w.cols;
  if (M == 0 || N == 0) return;
  // Chunks of output columns: enough tasks to balance, each large enough to amortise dispatch.
  const int64_t work_per_col = M * K;
  int64_t chunk = std::max<int64_t>(16, (int64_t{1} << 16) / std::max<int64_t>(1, work_per_col));
  chunk = std::min<int64_t>(chunk, std::max<int64_t>(16, (N + 4 * pool.num_threads() - 1) /
                                                             (4 * pool.num_threads())));
  const int64_t align = w.layout == Layout::kPanels ? kPanelRows : 16;  // packed: whole panels
  chunk = (chunk + align - 1) / align * align;
  const int64_t tasks = (N + chunk - 1) / chunk;
  pool.ParallelFor(tasks, [&](int64_t t) {
    int64_t n0 = t * chunk, n1 = std::min(N, n0 + chunk);
    GemmRange(x, K, M, w, n0, n1, y + n0, N, accumulate);
  });
}

}  // namespace ls::cpu
