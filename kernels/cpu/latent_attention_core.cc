// The latent attention inner loops: dispatch by the CPU, and the portable twins of the AVX-512
// microkernels, written to reproduce their arithmetic operation for operation (fused
// multiply-adds per lane, the same reduction trees, the same exp polynomial).
#include "kernels/cpu/latent_attention_core.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/gemm.h"
#include "kernels/dtype.h"

namespace ls::cpu::internal {
namespace {

const bool kAvx512 = CpuHasAvx512();

// The AVX-512 kernels' horizontal sum of 16 lanes (their Sum4).
inline float Tree16(const float* a) {
  float u[4];
  for (int j = 0; j < 4; ++j) u[j] = (a[j] + a[8 + j]) + (a[4 + j] + a[12 + j]);
  return (u[0] + u[1]) + (u[2] + u[3]);
}

inline float Element(const void* row, bool bf16, int64_t k) {
  return bf16 ? Bf16ToF32(static_cast<const uint16_t*>(row)[k]) : static_cast<const float*>(row)[k];
}

}  // namespace

float LatentExp(float x) {
  // exp_avx512.h's Exp, one lane at a time.
  x = std::max(std::min(x, 88.f), -88.f);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = std::fma(-n, 0.693359375f, x);
  r = std::fma(-n, -2.12194440e-4f, r);
  float p = 1.0f / 720;
  p = std::fma(p, r, 1.0f / 120);
  p = std::fma(p, r, 1.0f / 24);
  p = std::fma(p, r, 1.0f / 6);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  return std::ldexp(p, static_cast<int>(n));
}

void LatentScoresPortable(const float* const* qa, const float* const* qb, int32_t group, const LatentRows& rows,
                          float scale, float* scores, int64_t stride) {
  const bool pairs = LatentPairLanes(rows);
  auto lane = [pairs](int32_t k) { return pairs ? (k % 32) / 2 : k % 16; };
  for (int32_t g = 0; g < group; ++g)
    for (int32_t i = 0; i < rows.n; ++i) {
      float lanes[16] = {};
      for (int32_t k = 0; k < rows.na; ++k)
        lanes[lane(k)] = std::fma(qa[g][k], Element(rows.a[i], rows.bf16, k), lanes[lane(k)]);
      for (int32_t k = 0; k < rows.nb; ++k)
        lanes[lane(k)] = std::fma(qb[g][k], Element(rows.b[i], rows.bf16, k), lanes[lane(k)]);
      scores[g * stride + i] = Tree16(lanes) * scale;
    }
}

void LatentValuesPortable(const float* w, int64_t stride, int32_t group, const LatentRows& rows, float* const* out,
                          const float* init, const float* post) {
  for (int32_t g = 0; g < group; ++g)
    for (int32_t k = 0; k < rows.na; ++k) {
      float acc = init ? init[g] * out[g][k] : 0.f;
      for (int32_t i = 0; i < rows.n; ++i) acc = std::fma(w[g * stride + i], Element(rows.a[i], rows.bf16, k), acc);
      if (post) acc *= post[g];
      out[g][k] = acc;
    }
}

float LatentExpSumPortable(float* s, int32_t n, float m) {
  float lanes[16] = {};
  for (int32_t i = 0; i < n; ++i) {
    s[i] = LatentExp(s[i] - m);
    lanes[i % 16] += s[i];
  }
  return Tree16(lanes);
}

float LatentMax(const float* s, int32_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n; ++i) m = std::max(m, s[i]);
  return m;
}

void LatentScores(const float* const* qa, const float* const* qb, int32_t group, const LatentRows& rows, float scale,
                  float* scores, int64_t stride) {
  if (kAvx512) return LatentScoresAvx512(qa, qb, group, rows, scale, scores, stride);
  LatentScoresPortable(qa, qb, group, rows, scale, scores, stride);
}

void LatentValues(const float* w, int64_t stride, int32_t group, const LatentRows& rows, float* const* out,
                  const float* init, const float* post) {
  if (kAvx512) return LatentValuesAvx512(w, stride, group, rows, out, init, post);
  LatentValuesPortable(w, stride, group, rows, out, init, post);
}

float LatentExpSum(float* s, int32_t n, float m) {
  return kAvx512 ? LatentExpSumAvx512(s, n, m) : LatentExpSumPortable(s, n, m);
}

}  // namespace ls::cpu::internal
