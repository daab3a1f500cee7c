// The latent attention inner loops: calls into the active kernel table (the microkernels:
// latent_attention_simd.cc; exponentials: vector_math.h's ExpRow).
#include "kernels/cpu/latent_attention_core.h"

#include <limits>

#include "kernels/cpu/simd/kernel_table.h"

namespace ls::cpu::internal {

void LatentScores(const float* const* qa, const float* const* qb, int32_t group, const LatentRows& rows, float scale,
                  float* scores, int64_t stride) {
  ActiveKernels().LatentScores(qa, qb, group, rows, scale, scores, stride);
}

void LatentValues(const float* w, int64_t stride, int32_t group, const LatentRows& rows, float* const* out,
                  const float* init, const float* post) {
  ActiveKernels().LatentValues(w, stride, group, rows, out, init, post);
}

float LatentMax(const float* s, int32_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n; ++i) m = s[i] > m ? s[i] : m;
  return m;
}

float LatentExpSum(float* s, int32_t n, float m) { return ActiveKernels().ExpRow(s, m, s, n); }

float LatentExp(float x) {
  float e;
  ActiveKernels().ExpRow(&x, 0.f, &e, 1);
  return e;
}

}  // namespace ls::cpu::internal
