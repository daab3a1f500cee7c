// FusedMulAdd(a, b, c) = a·b + c rounded once (IEEE fma), inlined on every CPU: the hardware
// instruction where the compiler targets one (x86 with FMA, AArch64), else exact float64
// arithmetic rounded to odd and then to float32, which is correctly rounded (53 ≥ 24 + 2 bits), so
// the portable kernels give the SIMD kernels' bits without a libm call per element.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ls::cpu {

inline float FusedMulAdd(float a, float b, float c) {
#if defined(__FMA__) || defined(__aarch64__) || defined(__ARM_FEATURE_FMA)
  return __builtin_fmaf(a, b, c);
#else
  const double p = static_cast<double>(a) * static_cast<double>(b);  // exact: 48 significant bits
  double s = p + static_cast<double>(c);
  if (!std::isfinite(s)) return static_cast<float>(s);
  // The exact error of s (Knuth's two-sum); where it is not zero and s is even, s moves one unit
  // toward the exact sum, which makes it the round-to-odd result.
  const double bv = s - p, av = s - bv;
  const double err = (p - av) + (static_cast<double>(c) - bv);
  if (err != 0.0) {
    uint64_t bits;
    std::memcpy(&bits, &s, 8);
    if ((bits & 1u) == 0) {
      bits = (err > 0.0) == (s > 0.0) ? bits + 1 : bits - 1;
      std::memcpy(&s, &bits, 8);
    }
  }
  return static_cast<float>(s);
#endif
}

}  // namespace ls::cpu
