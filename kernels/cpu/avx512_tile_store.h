// The column stores the AVX-512 GEMM kernels share: a 16-lane mask for the columns left, and a
// tile's accumulators written to (or added into) y with the columns past the tile's last valid one
// left alone. Included by the AVX-512 sources only (each compiled with its own target flags, so
// these stay private to each: an unnamed namespace).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace ls::cpu::internal {
namespace {

inline __mmask16 ColumnMask(int64_t valid) {
  return valid >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << valid) - 1u);
}

// out[c] (+)= v[c] for the first min(valid, 16) columns.
inline void StoreColumns(float* out, __m512 v, int64_t valid, bool accumulate) {
  const __mmask16 mask = ColumnMask(valid);
  if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, out), v);
  _mm512_mask_storeu_ps(out, mask, v);
}

// y[m, p · kPanelRows + 16 h + c] (+)= acc[m][p][h][c] for the columns before `valid`.
template <int MR, int NP>
inline void StoreTile(const __m512 (&acc)[MR][NP][2], float* y, int64_t ldy, int64_t valid, bool accumulate) {
  for (int m = 0; m < MR; ++m) {
    for (int p = 0; p < NP; ++p) {
      for (int h = 0; h < 2; ++h) {
        const int64_t col = p * kPanelRows + h * 16;
        if (col < valid) StoreColumns(y + m * ldy + col, acc[m][p][h], valid - col, accumulate);
      }
    }
  }
}

}  // namespace
}  // namespace ls::cpu::internal
