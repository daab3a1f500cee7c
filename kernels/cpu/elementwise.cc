// CPU elementwise ops on activation rows: bias addition and sigmoid gating.
#include "kernels/cpu/cpu_ops.h"
#include "kernels/dtype.h"

namespace ls::cpu {

void AddBias(ThreadPool& pool, float* y, int64_t rows, const Tensor& bias) {
  const int64_t n = bias.cols;
  pool.ParallelForRanges(rows, n, 16384, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t i = 0; i < n; ++i) y[r * n + i] += LoadAsF32(bias.data, bias.dtype, i);
  });
}

void MulSigmoid(ThreadPool& pool, float* x, int64_t rows, int64_t width, const float* gate, int64_t gate_width) {
  pool.ParallelForRanges(rows, width, 16384, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* g = gate + r * gate_width;
      float* xr = x + r * width;
      if (gate_width == 1) {
        const float s = Sigmoid(g[0]);
        for (int64_t i = 0; i < width; ++i) xr[i] *= s;
      } else {
        for (int64_t i = 0; i < width; ++i) xr[i] *= Sigmoid(g[i]);
      }
    }
  });
}

}  // namespace ls::cpu
