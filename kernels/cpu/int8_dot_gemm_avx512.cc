// AVX-512 VNNI kernels of the int8-activation GEMM: tiles of MR activation rows × NP panels; per k
// quad a panel's codes are one or two 64-byte loads (4-bit codes split into two by a mask and a
// shift), and each activation row's four int8 values, broadcast, meet them in one vpdpbusd per 16
// output rows. Integer sums are exact; the float steps are those of int8_dot_gemm.h. Compiled with
// AVX-512 VNNI flags; only called when the CPU reports AVX-512 VNNI.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/int8_dot_gemm.h"
#include "kernels/cpu/avx512_tile_store.h"

namespace ls::cpu::internal {
namespace {

constexpr int64_t P = kPanelRows;

inline __m512 LoadScales(const uint8_t* s, DType t) {
  if (t == DType::kF32) return _mm512_loadu_ps(s);
  const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

inline int32_t Quad(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

struct Weights {
  const uint8_t* codes;
  const uint8_t* scales;
  const int32_t* sums;  // I8: per stored row
  DType scale_dtype;
  int64_t K, kq, groups, group;
};

constexpr int64_t kAheadBytes = 1024;

// I8 codes, one scale per row: the whole k range in int32, scaled once.
template <int MR, int NP>
void TileI8(const Int8Rows& x, int64_t m0, const Weights& w, int64_t panel, float* y, int64_t ldy, int64_t valid,
            bool accumulate) {
  __m512i acc[MR][NP][2];
  for (int m = 0; m < MR; ++m)
    for (int p = 0; p < NP; ++p) acc[m][p][0] = acc[m][p][1] = _mm512_setzero_si512();
  for (int64_t q = 0; q < w.kq; ++q) {
    __m512i lo[NP], hi[NP];
    for (int p = 0; p < NP; ++p) {
      const uint8_t* c = w.codes + ((panel + p) * w.kq + q) * 128;
      _mm_prefetch(reinterpret_cast<const char*>(c + kAheadBytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + kAheadBytes + 64), _MM_HINT_T0);
      lo[p] = _mm512_loadu_si512(c);
      hi[p] = _mm512_loadu_si512(c + 64);
    }
    for (int m = 0; m < MR; ++m) {
      const __m512i xb = _mm512_set1_epi32(Quad(x.u + (m0 + m) * x.kp + 4 * q));
      for (int p = 0; p < NP; ++p) {
        acc[m][p][0] = _mm512_dpbusd_epi32(acc[m][p][0], xb, lo[p]);
        acc[m][p][1] = _mm512_dpbusd_epi32(acc[m][p][1], xb, hi[p]);
      }
    }
  }
  for (int p = 0; p < NP; ++p) {
    for (int h = 0; h < 2; ++h) {
      const int64_t col = p * P + h * 16;
      if (col >= valid) continue;
      const int64_t row = (panel + p) * P + h * 16;
      const __m512i offset = _mm512_slli_epi32(_mm512_loadu_si512(w.sums + row), 7);  // 128 · Σ w
      const __m512 sw = LoadScales(w.scales + row * 4, DType::kF32);
      for (int m = 0; m < MR; ++m) {
        const __m512 c = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[m][p][h], offset));
        const __m512 v = _mm512_mul_ps(_mm512_mul_ps(c, _mm512_set1_ps(x.scale[m0 + m])), sw);
        StoreColumns(y + m * ldy + col, v, valid - col, accumulate);
      }
    }
  }
}

// U4 codes in groups along k: int32 per group, folded into float with the group's scales.
template <int MR, int NP>
void TileU4(const Int8Rows& x, int64_t m0, const Weights& w, int64_t panel, float* y, int64_t ldy, int64_t valid,
            bool accumulate) {
  const int64_t SB = DTypeBits(w.scale_dtype) / 8;
  const __m512i nibble = _mm512_set1_epi8(15);
  __m512 out[MR][NP][2];
  for (int m = 0; m < MR; ++m)
    for (int p = 0; p < NP; ++p) out[m][p][0] = out[m][p][1] = _mm512_setzero_ps();
  const int64_t quads_per_group = w.group / 4;
  for (int64_t g = 0; g < w.groups; ++g) {
    __m512i acc[MR][NP][2];
    for (int m = 0; m < MR; ++m)
      for (int p = 0; p < NP; ++p) acc[m][p][0] = acc[m][p][1] = _mm512_setzero_si512();
    const int64_t q_end = std::min(w.kq, (g + 1) * quads_per_group);
    for (int64_t q = g * quads_per_group; q < q_end; ++q) {
      __m512i lo[NP], hi[NP];
      for (int p = 0; p < NP; ++p) {
        const uint8_t* c = w.codes + ((panel + p) * w.kq + q) * 64;
        _mm_prefetch(reinterpret_cast<const char*>(c + kAheadBytes), _MM_HINT_T0);
        const __m512i v = _mm512_loadu_si512(c);
        lo[p] = _mm512_and_si512(v, nibble);
        hi[p] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
      }
      for (int m = 0; m < MR; ++m) {
        const __m512i xb = _mm512_set1_epi32(Quad(x.q + (m0 + m) * x.kp + 4 * q));
        for (int p = 0; p < NP; ++p) {
          acc[m][p][0] = _mm512_dpbusd_epi32(acc[m][p][0], lo[p], xb);
          acc[m][p][1] = _mm512_dpbusd_epi32(acc[m][p][1], hi[p], xb);
        }
      }
    }
    for (int p = 0; p < NP; ++p) {
      const int64_t at = ((panel + p) * w.groups + g) * P;
      const __m512 s0 = LoadScales(w.scales + at * SB, w.scale_dtype);
      const __m512 s1 = LoadScales(w.scales + (at + 16) * SB, w.scale_dtype);
      for (int m = 0; m < MR; ++m) {
        const __m512i offset = _mm512_set1_epi32(8 * x.sums[(m0 + m) * x.groups + g]);
        out[m][p][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[m][p][0], offset)), s0, out[m][p][0]);
        out[m][p][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[m][p][1], offset)), s1, out[m][p][1]);
      }
    }
  }
  for (int m = 0; m < MR; ++m) {
    const __m512 sx = _mm512_set1_ps(x.scale[m0 + m]);
    for (int p = 0; p < NP; ++p)
      for (int h = 0; h < 2; ++h) {
        const int64_t col = p * P + h * 16;
        if (col < valid) StoreColumns(y + m * ldy + col, _mm512_mul_ps(out[m][p][h], sx), valid - col, accumulate);
      }
  }
}

// Panels per tile: as many as keep the accumulators and loaded codes within 32 registers.
constexpr int PanelsI8(int MR) { return MR <= 2 ? 4 : MR <= 4 ? 3 : MR <= 6 ? 2 : 1; }
constexpr int PanelsU4(int MR) { return MR == 1 ? 4 : MR <= 3 ? 2 : 1; }

template <bool I8, int MR>
void Rows(const Int8Rows& x, int64_t m0, const Weights& w, int64_t p_begin, int64_t p_end, int64_t n_begin,
          int64_t n_end, float* y, int64_t ldy, bool accumulate) {
  constexpr int NP = I8 ? PanelsI8(MR) : PanelsU4(MR);
  auto tile = [&](auto np, int64_t p) {
    constexpr int N = decltype(np)::value;
    float* yp = y + (p * P - n_begin);
    if constexpr (I8) {
      TileI8<MR, N>(x, m0, w, p, yp, ldy, n_end - p * P, accumulate);
    } else {
      TileU4<MR, N>(x, m0, w, p, yp, ldy, n_end - p * P, accumulate);
    }
  };
  int64_t p = p_begin;
  for (; p + NP <= p_end; p += NP) tile(std::integral_constant<int, NP>{}, p);
  switch (p_end - p) {
    case 3:
      tile(std::integral_constant < int, NP<3 ? NP : 3>{}, p);
      break;
    case 2:
      tile(std::integral_constant < int, NP<2 ? NP : 2>{}, p);
      break;
    case 1:
      tile(std::integral_constant<int, 1>{}, p);
      break;
    default:
      break;
  }
}

template <bool I8>
using RowsFn = void (*)(const Int8Rows&, int64_t, const Weights&, int64_t, int64_t, int64_t, int64_t, float*, int64_t,
                        bool);
template <bool I8>
constexpr RowsFn<I8> kRows[13] = {nullptr,      Rows<I8, 1>,  Rows<I8, 2>, Rows<I8, 3>, Rows<I8, 4>,
                                  Rows<I8, 5>,  Rows<I8, 6>,  Rows<I8, 7>, Rows<I8, 8>, Rows<I8, 9>,
                                  Rows<I8, 10>, Rows<I8, 11>, Rows<I8, 12>};

bool HasVnni() { return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"); }
const bool kHasVnni = HasVnni();

template <bool I8>
void Range(const Int8Rows& x, const Weights& w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
           bool accumulate) {
  const int64_t max_rows = I8 ? 12 : 6;
  const int64_t step_bytes = I8 ? 128 : 64;
  const int64_t group = std::max<int64_t>(4, (int64_t{256} << 10) / std::max<int64_t>(1, w.kq * step_bytes));
  const int64_t p_first = n_begin / P, p_last = (n_end + P - 1) / P;
  for (int64_t g = p_first; g < p_last; g += group) {
    const int64_t g_end = std::min(p_last, g + group);
    for (int64_t m = 0; m < x.rows; m += max_rows) {
      const int64_t rows = std::min(max_rows, x.rows - m);
      kRows<I8>[rows](x, m, w, g, g_end, n_begin, n_end, y + m * ldy, ldy, accumulate);
    }
  }
}

}  // namespace

// Row rounding for the int8 kernels, the same bits as the portable loop (int8_dot_gemm.cc): the
// largest |x| (a NaN skipped, as std::max skips it), x · inv rounded to nearest even by the
// conversion (the default rounding mode), a NaN's integer indefinite clamped to -127 as the
// portable clamp makes it; the group sums from the 32-bit codes where a group is whole vectors.
float RowAbsMaxAvx512(const float* x, int64_t K) {
  __m512 amax = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 mask = ColumnMask(K - k);
    // vmaxps returns its second operand when either is a NaN: the running maximum.
    amax = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(mask, x + k)), amax);
  }
  return _mm512_reduce_max_ps(amax);
}

bool RoundRowAvx512(const float* x, int64_t K, float inv, int64_t group, int8_t* q, uint8_t* u, int32_t* sums) {
  static const bool has_bw = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  if (!has_bw || (group > 0 && group % 16 != 0)) return false;
  const __m512 scale = _mm512_set1_ps(inv);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 mask = ColumnMask(K - k);
    __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x + k), scale));
    v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
    const __m128i b = _mm512_cvtepi32_epi8(v);
    _mm_mask_storeu_epi8(q + k, mask, b);
    _mm_mask_storeu_epi8(u + k, mask, _mm_xor_si128(b, _mm_set1_epi8(static_cast<char>(0x80))));
    if (group > 0) sums[k / group] += _mm512_reduce_add_epi32(_mm512_maskz_mov_epi32(mask, v));
  }
  return true;
}

bool Int8DotRangeAvx512(const Int8Rows& x, const Tensor& t, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                        bool accumulate) {
  if (!kHasVnni) return false;
  Weights w;
  w.codes = static_cast<const uint8_t*>(t.data);
  w.scales = static_cast<const uint8_t*>(t.quant.scale);
  w.scale_dtype = t.quant.scale_dtype;
  w.K = t.cols;
  w.kq = t.stored_cols() / 4;
  w.groups = t.scale_cols();
  w.group = t.quant.block_cols;
  w.sums = reinterpret_cast<const int32_t*>(w.scales + DTypeBytes(w.scale_dtype, t.stored_rows() * w.groups));
  if (t.dtype == DType::kI8) {
    Range<true>(x, w, n_begin, n_end, y, ldy, accumulate);
  } else {
    Range<false>(x, w, n_begin, n_end, y, ldy, accumulate);
  }
  return true;
}

}  // namespace ls::cpu::internal
