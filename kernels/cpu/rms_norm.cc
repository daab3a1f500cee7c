// CPU RMSNorm over rows, in float32 (docs/math.md, "RMSNorm").
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vector_math.h"

namespace ls::cpu {

void RmsNorm(ThreadPool& pool, const float* x, int64_t rows, const Tensor& w, float eps, float* out) {
  const int64_t width = w.cols;
  const float* wf = static_cast<const float*>(w.data);
  if (w.dtype != DType::kF32) {
    thread_local std::vector<float> scale;  // the weight widened to float32 once per call
    scale.resize(width);
    for (int64_t i = 0; i < width; ++i) scale[i] = LoadAsF32(w.data, w.dtype, i);
    wf = scale.data();
  }
  // A vectorised row costs a few nanoseconds per hundred values: tasks of at least 32K values,
  // so a decode step's norms stay on this thread.
  pool.ParallelForRanges(rows, width, 32768, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) RmsNormRow(x + r * width, wf, width, eps, out + r * width);
  });
}

}  // namespace ls::cpu
