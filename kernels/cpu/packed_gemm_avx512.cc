// AVX-512 packed-GEMM microkernels: tiles of MR activation rows × NP panels (32 output columns
// each). Per k step a tile widens NP panel runs to float32 once and issues MR · NP · 2 fused
// multiply-adds against broadcast activations; each accumulator is one output element per lane,
// summed in k order from zero (see packed_gemm.h). Compiled with AVX-512 flags; only called
// when the CPU reports AVX-512F/BW.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/avx512_tile_store.h"

namespace ls::cpu::internal {
namespace {

constexpr int64_t P = kPanelRows;

// One k step of a panel as two float32 vectors: rows 0-15 and rows 16-31.
template <DType T>
inline void LoadStep(const void* w, int64_t i, __m512& lo, __m512& hi) {
  if constexpr (T == DType::kBF16) {
    const __m512i v = _mm512_loadu_si512(static_cast<const uint16_t*>(w) + i);
    lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    hi = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  } else if constexpr (T == DType::kF16) {
    const auto* h = static_cast<const uint16_t*>(w) + i;
    lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
    hi = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + 16)));
  } else {
    const float* f = static_cast<const float*>(w) + i;
    lo = _mm512_loadu_ps(f);
    hi = _mm512_loadu_ps(f + 16);
  }
}

// Requests the weights `kAhead` k steps on, so that a tile's stream of weights arrives before it
// is needed (the hardware prefetcher ramps up again on every new panel and expert); the address
// may lie past the panel: a prefetch never faults.
constexpr int64_t kAhead = 16;
template <DType T>
inline void PrefetchStep(const void* w, int64_t i) {
  const char* at = static_cast<const char*>(w) + i * (T == DType::kF32 ? 4 : 2);
  _mm_prefetch(at, _MM_HINT_T0);
  if constexpr (T == DType::kF32) _mm_prefetch(at + 64, _MM_HINT_T0);
}

// y[m, c] (+)= tile result for c < valid (columns counted from the tile's first panel).
template <DType T, int MR, int NP>
inline void Tile(const float* x, int64_t ldx, const void* w, int64_t K, int64_t panel, float* y,
                 int64_t ldy, int64_t valid, bool accumulate) {
  __m512 acc[MR][NP][2];
  for (int m = 0; m < MR; ++m)
    for (int p = 0; p < NP; ++p) acc[m][p][0] = acc[m][p][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512 lo[NP], hi[NP];
    for (int p = 0; p < NP; ++p) PrefetchStep<T>(w, ((panel + p) * K + k + kAhead) * P);
    for (int p = 0; p < NP; ++p) LoadStep<T>(w, ((panel + p) * K + k) * P, lo[p], hi[p]);
    for (int m = 0; m < MR; ++m) {
      const __m512 xb = _mm512_set1_ps(x[m * ldx + k]);
      for (int p = 0; p < NP; ++p) {
        acc[m][p][0] = _mm512_fmadd_ps(xb, lo[p], acc[m][p][0]);
        acc[m][p][1] = _mm512_fmadd_ps(xb, hi[p], acc[m][p][1]);
      }
    }
  }
  StoreTile<MR, NP>(acc, y, ldy, valid, accumulate);
}

// Panels per tile for a tile of MR rows: as many as keep accumulators and widened weights within
// the 32 vector registers.
constexpr int PanelsFor(int MR) { return MR <= 2 ? 4 : MR <= 4 ? 3 : MR <= 6 ? 2 : 1; }

// Rows [0, MR) against panels [p_begin, p_end) of the range, whose first panel is p_first.
template <DType T, int MR>
void Rows(const float* x, int64_t ldx, const void* w, int64_t K, int64_t p_begin, int64_t p_end,
          int64_t n_begin, int64_t n_end, float* y, int64_t ldy, bool accumulate) {
  constexpr int NP = PanelsFor(MR);
  int64_t p = p_begin;
  for (; p + NP <= p_end; p += NP)
    Tile<T, MR, NP>(x, ldx, w, K, p, y + (p * P - n_begin), ldy, n_end - p * P, accumulate);
  // The remaining panels (fewer than NP) as one narrower tile.
  float* yp = y + (p * P - n_begin);
  const int64_t valid = n_end - p * P;
  switch (p_end - p) {
    case 3: Tile<T, MR, NP < 3 ? NP : 3>(x, ldx, w, K, p, yp, ldy, valid, accumulate); break;
    case 2: Tile<T, MR, NP < 2 ? NP : 2>(x, ldx, w, K, p, yp, ldy, valid, accumulate); break;
    case 1: Tile<T, MR, 1>(x, ldx, w, K, p, yp, ldy, valid, accumulate); break;
    default: break;
  }
}

template <DType T>
using RowsFn = void (*)(const float*, int64_t, const void*, int64_t, int64_t, int64_t, int64_t, int64_t, float*,
                        int64_t, bool);

template <DType T>
constexpr RowsFn<T> kRows[13] = {nullptr,       Rows<T, 1>,  Rows<T, 2>,  Rows<T, 3>, Rows<T, 4>,
                                 Rows<T, 5>,    Rows<T, 6>,  Rows<T, 7>,  Rows<T, 8>, Rows<T, 9>,
                                 Rows<T, 10>,   Rows<T, 11>, Rows<T, 12>};

template <DType T>
void Range(const float* x, int64_t ldx, int64_t M, const void* w, int64_t K, int64_t n_begin, int64_t n_end,
           float* y, int64_t ldy, bool accumulate) {
  constexpr int64_t kMaxRows = 12;
  // Panels in groups that stay in the L2 cache while every row block passes over them.
  const int64_t group = std::max<int64_t>(4, (int64_t{256} << 10) / std::max<int64_t>(1, K * P * 4));
  const int64_t p_first = n_begin / P, p_last = (n_end + P - 1) / P;
  for (int64_t g = p_first; g < p_last; g += group) {
    const int64_t g_end = std::min(p_last, g + group);
    for (int64_t m = 0; m < M; m += kMaxRows) {
      const int64_t rows = std::min(kMaxRows, M - m);
      kRows<T>[rows](x + m * ldx, ldx, w, K, g, g_end, n_begin, n_end, y + m * ldy, ldy, accumulate);
    }
  }
}

}  // namespace

void PackedGemmRangeAvx512(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin,
                           int64_t n_end, float* y, int64_t ldy, bool accumulate) {
  switch (w.dtype) {
    case DType::kF32: Range<DType::kF32>(x, ldx, M, w.data, w.cols, n_begin, n_end, y, ldy, accumulate); break;
    case DType::kBF16: Range<DType::kBF16>(x, ldx, M, w.data, w.cols, n_begin, n_end, y, ldy, accumulate); break;
    case DType::kF16: Range<DType::kF16>(x, ldx, M, w.data, w.cols, n_begin, n_end, y, ldy, accumulate); break;
    default: break;  // quantized weights: kernels/cpu/quantized_gemm.h
  }
}

}  // namespace ls::cpu::internal
