// CPU RMSNorm over rows, in float32 as DESIGN.md §3 specifies.
#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace ls::cpu {

void RmsNorm(ThreadPool& pool, const float* x, int64_t rows, const Tensor& w, float eps, float* out) {
  const int64_t width = w.cols;
  auto row = [&](int64_t r) {
    const float* xr = x + r * width;
    float* o = out + r * width;
    float ss = 0.f;
    for (int64_t i = 0; i < width; ++i) ss += xr[i] * xr[i];
    const float inv = 1.f / std::sqrt(ss / static_cast<float>(width) + eps);
    for (int64_t i = 0; i < width; ++i) o[i] = xr[i] * inv * LoadAsF32(w.data, w.dtype, i);
  };
  if (rows * width < 16384) {
    for (int64_t r = 0; r < rows; ++r) row(r);
  } else {
    pool.ParallelFor(rows, row);
  }
}

}  // namespace ls::cpu
