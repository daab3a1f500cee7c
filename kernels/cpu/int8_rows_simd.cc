// Row rounding for the int8-activation GEMM (int8_dot_gemm.h) for every SIMD target, the same bits
// as its definition: the largest |x| (a NaN skipped: Max returns its second operand, the running
// maximum, when either is NaN), x · inv rounded to nearest even by the conversion, a NaN's
// INT32_MIN clamped to −127, the unsigned code q + 128 as q's byte with its top bit flipped, and the
// group sums of whole vectors (group a multiple of 16).
#include "kernels/cpu/int8_dot_gemm.h"
#include "kernels/cpu/simd/vec.h"

LS_SIMD_BEGIN

float RowAbsMax(const float* x, int64_t K) {
  V16 amax = Zero();
  for (int64_t k = 0; k < K; k += 16) {
    const int n = K - k >= 16 ? 16 : static_cast<int>(K - k);
    amax = Max(Abs(LoadN(x + k, n)), amax);
  }
  return ReduceMax(amax);
}

void RoundRowInt8(const float* x, int64_t K, float inv, int64_t group, int8_t* q, uint8_t* u, int32_t* sums) {
  const V16 scale = Set(inv);
  const I16 lo = SetI(-127), hi = SetI(127), flip = SetI(0x80);
  for (int64_t k = 0; k < K; k += 16) {
    const int n = K - k >= 16 ? 16 : static_cast<int>(K - k);
    const I16 v = MinI(MaxI(RoundToInt(Mul(LoadN(x + k, n), scale)), lo), hi);
    StoreI8N(q + k, v, n);
    StoreI8N(u + k, XorI(v, flip), n);
    if (group > 0) sums[k / group] += ReduceAddI(v);  // lanes past n loaded as 0: code 0
  }
}

LS_SIMD_END
