// CPU RMSNorm over rows, in float32 as DESIGN.md §3 specifies.
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
  auto row = [&](int64_t r) { RmsNormRow(x + r * width, wf, width, eps, out + r * width); };
  // A vectorised row costs a few nanoseconds per hundred values: small calls (a decode step's
  // norms) stay on this thread rather than pay for a parallel loop.
  if (rows * width < 65536) {
    for (int64_t r = 0; r < rows; ++r) row(r);
  } else {
    pool.ParallelFor(rows, row);
  }
}

}  // namespace ls::cpu
