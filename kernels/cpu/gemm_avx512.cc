// AVX-512 GEMM microkernels: tiles of MB activation rows × NB weight rows, one 16-lane float
// accumulator per output element, weights converted to float32 in registers as they stream in.
// Compiled with AVX-512 flags; only called when the CPU reports AVX-512F/BW.
#include <immintrin.h>

#include "kernels/cpu/gemm.h"

namespace ls::cpu::internal {

bool CpuHasAvx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

namespace {

template <DType T>
inline __m512 LoadW(const void* base, int64_t i, __mmask16 mask) {
  if constexpr (T == DType::kF32) {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(base) + i);
  } else if constexpr (T == DType::kBF16) {
    __m256i h = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(base) + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    __m256i h = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(base) + i);
    return _mm512_cvtph_ps(h);
  }
}

template <DType T, int MB, int NB>
inline void Tile(const float* x, int64_t ldx, const void* w, int64_t K, int64_t n0, float* y,
                 int64_t ldy, bool accumulate) {
  __m512 acc[MB][NB];
  for (int m = 0; m < MB; ++m)
    for (int n = 0; n < NB; ++n) acc[m][n] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 wv[NB];
    for (int n = 0; n < NB; ++n) wv[n] = LoadW<T>(w, (n0 + n) * K + k, 0xffff);
    for (int m = 0; m < MB; ++m) {
      __m512 xv = _mm512_loadu_ps(x + m * ldx + k);
      for (int n = 0; n < NB; ++n) acc[m][n] = _mm512_fmadd_ps(xv, wv[n], acc[m][n]);
    }
  }
  if (k < K) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (K - k)) - 1u);
    __m512 wv[NB];
    for (int n = 0; n < NB; ++n) wv[n] = LoadW<T>(w, (n0 + n) * K + k, mask);
    for (int m = 0; m < MB; ++m) {
      __m512 xv = _mm512_maskz_loadu_ps(mask, x + m * ldx + k);
      for (int n = 0; n < NB; ++n) acc[m][n] = _mm512_fmadd_ps(xv, wv[n], acc[m][n]);
    }
  }
  for (int m = 0; m < MB; ++m) {
    for (int n = 0; n < NB; ++n) {
      float s = _mm512_reduce_add_ps(acc[m][n]);
      float& out = y[m * ldy + n0 + n];
      out = accumulate ? out + s : s;
    }
  }
}

template <DType T, int MB>
void Rows(const float* x, int64_t ldx, const void* w, int64_t K, int64_t n_begin, int64_t n_end,
          float* y, int64_t ldy, bool accumulate) {
  constexpr int NB = MB == 1 ? 8 : 4;
  int64_t n = n_begin;
  for (; n + NB <= n_end; n += NB) Tile<T, MB, NB>(x, ldx, w, K, n, y, ldy, accumulate);
  for (; n < n_end; ++n) Tile<T, MB, 1>(x, ldx, w, K, n, y, ldy, accumulate);
}

template <DType T>
void Range(const float* x, int64_t ldx, int64_t M, const void* w, int64_t K, int64_t n_begin,
           int64_t n_end, float* y, int64_t ldy, bool accumulate) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) Rows<T, 4>(x + m * ldx, ldx, w, K, n_begin, n_end, y + m * ldy, ldy, accumulate);
  switch (M - m) {
    case 3: Rows<T, 3>(x + m * ldx, ldx, w, K, n_begin, n_end, y + m * ldy, ldy, accumulate); break;
    case 2: Rows<T, 2>(x + m * ldx, ldx, w, K, n_begin, n_end, y + m * ldy, ldy, accumulate); break;
    case 1: Rows<T, 1>(x + m * ldx, ldx, w, K, n_begin, n_end, y + m * ldy, ldy, accumulate); break;
    default: break;
  }
}

}  // namespace

void GemmRangeAvx512(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin,
                     int64_t n_end, float* y, int64_t ldy, bool accumulate) {
  // Work on the weight rows [n_begin, n_end) as rows [0, count) of a sub-view.
  const Tensor sub = w.RowSlice(n_begin, n_end - n_begin);
  const int64_t count = n_end - n_begin;
  switch (w.dtype) {
    case DType::kF32: Range<DType::kF32>(x, ldx, M, sub.data, w.cols, 0, count, y, ldy, accumulate); break;
    case DType::kBF16: Range<DType::kBF16>(x, ldx, M, sub.data, w.cols, 0, count, y, ldy, accumulate); break;
    case DType::kF16: Range<DType::kF16>(x, ldx, M, sub.data, w.cols, 0, count, y, ldy, accumulate); break;
    default: break;  // quantized weights: kernels/cpu/quantized_gemm.h
  }
}

}  // namespace ls::cpu::internal
