// CPU elementwise ops on activation rows: bias addition, sigmoid gating, the attention
// residuals' mix of block residuals, and plain adds, copies and zeroing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vector_math.h"
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
        thread_local std::vector<float> s;
        s.resize(static_cast<size_t>(width));
        SigmoidRow(g, s.data(), width);
        for (int64_t i = 0; i < width; ++i) xr[i] *= s[i];
      }
    }
  });
}

void AttnResMix(ThreadPool& pool, const AttnResParams& p) {
  const int64_t d = p.width, T = p.num_tokens;
  const int32_t n = p.num_blocks + 1;
  std::vector<float> w(d);
  for (int64_t i = 0; i < d; ++i)
    w[i] = LoadAsF32(p.norm_weight.data, p.norm_weight.dtype, i) * LoadAsF32(p.proj_weight.data, p.proj_weight.dtype, i);
  pool.ParallelForRanges(T, d * n, 16384, [&](int64_t t0, int64_t t1) {
    std::vector<float> s(n);
    std::vector<const float*> src(n);
    for (int64_t t = t0; t < t1; ++t) {
      for (int32_t i = 0; i < n; ++i) src[i] = (i < p.num_blocks ? p.blocks + (i * T) * d : p.last) + t * d;
      float mx = -std::numeric_limits<float>::infinity();
      for (int32_t i = 0; i < n; ++i) {
        float ss = 0.f, dot = 0.f;
        for (int64_t j = 0; j < d; ++j) {
          ss += src[i][j] * src[i][j];
          dot += src[i][j] * w[j];
        }
        s[i] = dot / std::sqrt(ss / static_cast<float>(d) + p.eps);
        mx = std::max(mx, s[i]);
      }
      float sum = 0.f;
      for (int32_t i = 0; i < n; ++i) sum += (s[i] = std::exp(s[i] - mx));
      float* out = p.out + t * d;
      for (int64_t j = 0; j < d; ++j) out[j] = 0.f;
      for (int32_t i = 0; i < n; ++i) {
        const float a = s[i] / sum;
        for (int64_t j = 0; j < d; ++j) out[j] += a * src[i][j];
      }
    }
  });
}

void Add(ThreadPool&, float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}
void Copy(ThreadPool&, float* dst, const float* src, int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void SetZero(ThreadPool&, float* x, int64_t n) {
  if (n > 0) std::memset(x, 0, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace ls::cpu
