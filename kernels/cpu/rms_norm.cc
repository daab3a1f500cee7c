// CPU RMSNorm over rows, in float32 as DESIGN.md §3 specifies.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace ls::cpu {

void RmsNorm(ThreadPool& pool, const float* x, int64_t rows, const Tensor& w, float eps, float* out) {
  const int64_t width = w.cols;
  thread_local std::vector<float> scale;  // the weight widened to float32 once per call
  scale.resize(width);
  for (int64_t i = 0; i < width; ++i) scale[i] = LoadAsF32(w.data, w.dtype, i);
  const float* wf = scale.data();
  auto row = [&](int64_t r) {
    const float* xr = x + r * width;
    float* o = out + r * width;
    // 16 running sums of squares (vectorised), added up in a fixed order.
    float part[16] = {};
    int64_t i = 0;
    for (; i + 16 <= width; i += 16)
      for (int j = 0; j < 16; ++j) part[j] += xr[i + j] * xr[i + j];
    for (int j = 0; i + j < width; ++j) part[j] += xr[i + j] * xr[i + j];
    float ss = 0.f;
    for (float p : part) ss += p;
    const float inv = 1.f / std::sqrt(ss / static_cast<float>(width) + eps);
    for (i = 0; i < width; ++i) o[i] = xr[i] * inv * wf[i];
  };
  if (rows * width < 16384) {
    for (int64_t r = 0; r < rows; ++r) row(r);
  } else {
    pool.ParallelFor(rows, row);
  }
}

}  // namespace ls::cpu
