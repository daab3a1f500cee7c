// The inner loops of the CPU latent attention ops (MLA absorbed and expanded), shared by both: a
// group of query vectors scored against rows of two parts, a softmax's numerators, and a group of
// weighted row sums: microkernels compiled for every SIMD target (latent_attention_simd.cc: every
// row loaded and widened once for the group, register accumulators), the same bits on each (the
// same fused multiply-adds in the same lanes, the vector layer's summation tree and e^x).
#pragma once

#include <cstdint>

namespace ls::cpu::internal {

// Query vectors served by one pass over the rows (heads of a token, or tokens of a head).
constexpr int32_t kLatentGroup = 8;

// Rows of two parts: row i is a[i][0:na] then b[i][0:nb], elements float32 or BF16 bits.
struct LatentRows {
  const void* const* a = nullptr;  // [n]
  const void* const* b = nullptr;  // [n]; unused when nb is 0
  int32_t n = 0;
  int32_t na = 0;
  int32_t nb = 0;
  bool bf16 = false;
};

// Whether element k of a part adds into lane (k % 32) / 2 (BF16 rows of even parts, read as
// pairs of elements), else into lane k % 16.
inline bool LatentPairLanes(const LatentRows& rows) { return rows.bf16 && rows.na % 2 == 0 && rows.nb % 2 == 0; }

// scores[g·stride + i] = scale · (qa[g] · a_i + qb[g] · b_i) for g < group ≤ kLatentGroup and
// i < rows.n. Element k of a part adds into its lane (LatentPairLanes; fused multiply-adds, k in
// order, part a before part b), then the 16 lanes are summed by a fixed tree.
void LatentScores(const float* const* qa, const float* const* qb, int32_t group, const LatentRows& rows, float scale,
                  float* scores, int64_t stride);
// out[g][0:rows.na] = init[g] · out[g] (init null: 0) + Σ_i w[g·stride + i] · a_i, in i order,
// then times post[g] (post null: as is). Parts b are not read.
void LatentValues(const float* w, int64_t stride, int32_t group, const LatentRows& rows, float* const* out,
                  const float* init, const float* post);
// The largest of s[0:n] (−∞ for n = 0).
float LatentMax(const float* s, int32_t n);
// s[i] = e^(s[i] − m) for i < n; returns their sum (lane i % 16, then the vector layer's tree).
float LatentExpSum(float* s, int32_t n, float m);
// e^x as the vector kernels compute it, for single values.
float LatentExp(float x);

}  // namespace ls::cpu::internal
