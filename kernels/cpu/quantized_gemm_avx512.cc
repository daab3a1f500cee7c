// AVX-512 quantized packed-GEMM microkernels: tiles of MR activation rows × NP panels, as in
// packed_gemm_avx512.cc, with each panel step's codes widened to float32 in registers: 8-bit codes
// by sign extension (e4m3 by moving its exponent and mantissa into float32 position and multiplying
// by 2^120, exact), 4-bit codes by masking the nibbles and looking their values up in a 16-entry
// table with one permute (or subtracting per-row zero points as integers). The widened weights are
// scaled once per tile step and shared by the tile's rows (see quantized_gemm.h for the arithmetic).
// Compiled with AVX-512 flags; only called when the CPU reports AVX-512F/BW.
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cpu/quantized_gemm.h"
#include "kernels/cpu/avx512_tile_store.h"

namespace ls::cpu::internal {
namespace {

constexpr int64_t P = kPanelRows;

template <DType C, DType S, bool Zero>
struct Format {
  static constexpr DType kCodes = C;
  static constexpr DType kScales = S;
  static constexpr bool kZero = Zero;
  static constexpr int64_t kStepBytes = DTypeBits(C) * P / 8;  // 32 (8-bit codes) or 16 (4-bit)
  static constexpr bool kScaleAfterSum = C == DType::kI8;
};

// The 16 float32 scales at `s` (elements of S).
template <DType S>
inline __m512 LoadScales(const uint8_t* s) {
  if constexpr (S == DType::kF32) {
    return _mm512_loadu_ps(s);
  } else if constexpr (S == DType::kBF16) {
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  } else {  // E8M0: 2^(e − 127); e = 0 is the subnormal 2^-127
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
    const __mmask16 zero = _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512());
    return _mm512_castsi512_ps(_mm512_mask_mov_epi32(_mm512_slli_epi32(e, 23), zero, _mm512_set1_epi32(0x00400000)));
  }
}

// One panel step's 32 codes as float32 values (zero point subtracted, not yet scaled): rows 0-15
// in lo, 16-31 in hi.
template <class F>
inline void Decode(const uint8_t* c, const __m512i* zero, __m512& lo, __m512& hi) {
  if constexpr (F::kCodes == DType::kI8) {
    lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c))));
    hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 16))));
  } else if constexpr (F::kCodes == DType::kF8E4M3) {
    // Sign-extended byte << 20 puts e and m at float32's exponent and mantissa; the mask keeps them
    // and the sign. As a float that is the value · 2^-120.
    const __m512i mask = _mm512_set1_epi32(static_cast<int>(0x87F00000u));
    const __m512 unbias = _mm512_set1_ps(0x1p120f);
    const __m512i a = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c)));
    const __m512i b = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 16)));
    lo = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(a, 20), mask)), unbias);
    hi = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(b, 20), mask)), unbias);
  } else {  // 4-bit: byte j holds row j (low nibble) and row 16 + j (high nibble)
    // A table lookup reads only an index's low 4 bits: the low nibble needs no mask.
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c)));
    const __m512i h = _mm512_srli_epi32(v, 4);
    if constexpr (F::kCodes == DType::kE2M1) {
      const __m512 table =
          _mm512_setr_ps(0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f, -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f);
      lo = _mm512_permutexvar_ps(v, table);
      hi = _mm512_permutexvar_ps(h, table);
    } else if constexpr (F::kZero) {
      lo = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(v, _mm512_set1_epi32(15)), zero[0]));
      hi = _mm512_cvtepi32_ps(_mm512_sub_epi32(h, zero[1]));
    } else {
      const __m512 table =
          _mm512_setr_ps(-8.f, -7.f, -6.f, -5.f, -4.f, -3.f, -2.f, -1.f, 0.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f);
      lo = _mm512_permutexvar_ps(v, table);
      hi = _mm512_permutexvar_ps(h, table);
    }
  }
}

constexpr int64_t kAheadBytes = 1024;  // prefetch distance in a panel's stream of codes

struct Weights {
  const uint8_t* codes;
  const uint8_t* scales;
  const uint8_t* zeros;
  int64_t K, group, groups;
};

// y[m, c] (+)= tile result for c < valid (columns counted from the tile's first panel).
template <class F, int MR, int NP>
inline void Tile(const float* x, int64_t ldx, const Weights& w, int64_t panel, float* y, int64_t ldy, int64_t valid,
                 bool accumulate) {
  constexpr int64_t SB = DTypeBits(F::kScales) / 8;
  const int64_t K = w.K;
  __m512 acc[MR][NP][2];
  for (int m = 0; m < MR; ++m)
    for (int p = 0; p < NP; ++p) acc[m][p][0] = acc[m][p][1] = _mm512_setzero_ps();
  for (int64_t g = 0, k0 = 0; k0 < K; ++g, k0 += w.group) {
    const int64_t k1 = std::min(K, k0 + w.group);
    __m512 s[NP][2];
    __m512i z[NP][2];
    for (int p = 0; p < NP; ++p) {
      const int64_t at = ((panel + p) * w.groups + g) * P;
      if constexpr (!F::kScaleAfterSum) {
        s[p][0] = LoadScales<F::kScales>(w.scales + at * SB);
        s[p][1] = LoadScales<F::kScales>(w.scales + (at + 16) * SB);
      }
      if constexpr (F::kZero) {
        z[p][0] = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.zeros + at)));
        z[p][1] = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.zeros + at + 16)));
      }
    }
    // The group's fused multiply-add chains; with `scaled` each widened weight is multiplied by
    // its scale first.
    auto chain = [&](auto scaled) {
      for (int64_t k = k0; k < k1; ++k) {
        __m512 lo[NP], hi[NP];
        for (int p = 0; p < NP; ++p) {
          const uint8_t* c = w.codes + ((panel + p) * K + k) * F::kStepBytes;
          _mm_prefetch(reinterpret_cast<const char*>(c + kAheadBytes), _MM_HINT_T0);
          Decode<F>(c, z[p], lo[p], hi[p]);
          if constexpr (decltype(scaled)::value) {
            lo[p] = _mm512_mul_ps(lo[p], s[p][0]);
            hi[p] = _mm512_mul_ps(hi[p], s[p][1]);
          }
        }
        for (int m = 0; m < MR; ++m) {
          const __m512 xb = _mm512_set1_ps(x[m * ldx + k]);
          for (int p = 0; p < NP; ++p) {
            acc[m][p][0] = _mm512_fmadd_ps(xb, lo[p], acc[m][p][0]);
            acc[m][p][1] = _mm512_fmadd_ps(xb, hi[p], acc[m][p][1]);
          }
        }
      }
    };
    if constexpr (F::kScales == DType::kE8M0) {
      // Power-of-two scales: multiplying the weight by s inside fma(x, w·s, acc) equals running the
      // group's chain on acc/s with the bare weight and multiplying by s after, bit for bit, while
      // every value stays a normal float32 — so with the group's scales in [2^-64, 2^63] (the
      // accumulators far from both ends of the range) the per-weight multiply goes.
      bool pow2 = true;
      for (int p = 0; p < NP; ++p)
        for (int h = 0; h < 2; ++h)
          pow2 &= _mm512_cmp_ps_mask(s[p][h], _mm512_set1_ps(0x1p-64f), _CMP_GE_OQ) == 0xffff &&
                  _mm512_cmp_ps_mask(s[p][h], _mm512_set1_ps(0x1p63f), _CMP_LE_OQ) == 0xffff;
      if (pow2) {
        for (int p = 0; p < NP; ++p)
          for (int h = 0; h < 2; ++h) {
            // 1/s = 2^(127 − e): exponent bits (254 − e) << 23.
            const __m512 inv =
                _mm512_castsi512_ps(_mm512_sub_epi32(_mm512_set1_epi32(254 << 23), _mm512_castps_si512(s[p][h])));
            for (int m = 0; m < MR; ++m) acc[m][p][h] = _mm512_mul_ps(acc[m][p][h], inv);
          }
        chain(std::false_type{});
        for (int m = 0; m < MR; ++m)
          for (int p = 0; p < NP; ++p)
            for (int h = 0; h < 2; ++h) acc[m][p][h] = _mm512_mul_ps(acc[m][p][h], s[p][h]);
        continue;
      }
    }
    chain(std::bool_constant<!F::kScaleAfterSum>{});
  }
  if constexpr (F::kScaleAfterSum) {
    for (int p = 0; p < NP; ++p) {
      const int64_t at = (panel + p) * w.groups * P;
      const __m512 s0 = LoadScales<F::kScales>(w.scales + at * SB);
      const __m512 s1 = LoadScales<F::kScales>(w.scales + (at + 16) * SB);
      for (int m = 0; m < MR; ++m) {
        acc[m][p][0] = _mm512_mul_ps(acc[m][p][0], s0);
        acc[m][p][1] = _mm512_mul_ps(acc[m][p][1], s1);
      }
    }
  }
  StoreTile<MR, NP>(acc, y, ldy, valid, accumulate);
}

constexpr int PanelsFor(int MR) { return MR <= 2 ? 4 : MR <= 4 ? 3 : MR <= 6 ? 2 : 1; }

template <class F, int MR>
void Rows(const float* x, int64_t ldx, const Weights& w, int64_t p_begin, int64_t p_end, int64_t n_begin, int64_t n_end,
          float* y, int64_t ldy, bool accumulate) {
  constexpr int NP = PanelsFor(MR);
  int64_t p = p_begin;
  for (; p + NP <= p_end; p += NP) Tile<F, MR, NP>(x, ldx, w, p, y + (p * P - n_begin), ldy, n_end - p * P, accumulate);
  float* yp = y + (p * P - n_begin);
  const int64_t valid = n_end - p * P;
  switch (p_end - p) {
    case 3:
      Tile < F, MR, NP<3 ? NP : 3>(x, ldx, w, p, yp, ldy, valid, accumulate);
      break;
    case 2:
      Tile < F, MR, NP<2 ? NP : 2>(x, ldx, w, p, yp, ldy, valid, accumulate);
      break;
    case 1:
      Tile<F, MR, 1>(x, ldx, w, p, yp, ldy, valid, accumulate);
      break;
    default:
      break;
  }
}

template <class F>
using RowsFn = void (*)(const float*, int64_t, const Weights&, int64_t, int64_t, int64_t, int64_t, float*, int64_t,
                        bool);

template <class F>
constexpr RowsFn<F> kRows[13] = {nullptr,    Rows<F, 1>, Rows<F, 2>, Rows<F, 3>,  Rows<F, 4>,  Rows<F, 5>, Rows<F, 6>,
                                 Rows<F, 7>, Rows<F, 8>, Rows<F, 9>, Rows<F, 10>, Rows<F, 11>, Rows<F, 12>};

template <class F>
void Range(const float* x, int64_t ldx, int64_t M, const Tensor& t, int64_t n_begin, int64_t n_end, float* y,
           int64_t ldy, bool accumulate) {
  constexpr int64_t kMaxRows = 12;
  const Weights w{static_cast<const uint8_t*>(t.data),
                  static_cast<const uint8_t*>(t.quant.scale),
                  static_cast<const uint8_t*>(t.quant.zero),
                  t.cols,
                  t.quant.block_cols,
                  t.scale_cols()};
  // Panels in groups that stay in the L2 cache while every row block passes over them.
  const int64_t group = std::max<int64_t>(4, (int64_t{256} << 10) / std::max<int64_t>(1, w.K * F::kStepBytes));
  const int64_t p_first = n_begin / P, p_last = (n_end + P - 1) / P;
  for (int64_t g = p_first; g < p_last; g += group) {
    const int64_t g_end = std::min(p_last, g + group);
    for (int64_t m = 0; m < M; m += kMaxRows) {
      const int64_t rows = std::min(kMaxRows, M - m);
      kRows<F>[rows](x + m * ldx, ldx, w, g, g_end, n_begin, n_end, y + m * ldy, ldy, accumulate);
    }
  }
}

}  // namespace

bool QuantizedGemmRangeAvx512(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin, int64_t n_end,
                              float* y, int64_t ldy, bool accumulate) {
  const DType s = w.quant.scale_dtype;
  const bool zero = w.quant.zero != nullptr;
  auto run = [&](auto format) {
    Range<decltype(format)>(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
    return true;
  };
  switch (w.dtype) {
    case DType::kI8:
      if (s == DType::kF32 && !zero && ScaleAfterSum(w)) return run(Format<DType::kI8, DType::kF32, false>{});
      break;
    case DType::kF8E4M3:
      if (s == DType::kF32 && !zero) return run(Format<DType::kF8E4M3, DType::kF32, false>{});
      break;
    case DType::kU4:
      if (s == DType::kF32)
        return zero ? run(Format<DType::kU4, DType::kF32, true>{}) : run(Format<DType::kU4, DType::kF32, false>{});
      if (s == DType::kBF16)
        return zero ? run(Format<DType::kU4, DType::kBF16, true>{}) : run(Format<DType::kU4, DType::kBF16, false>{});
      break;
    case DType::kE2M1:
      if (s == DType::kE8M0 && !zero) return run(Format<DType::kE2M1, DType::kE8M0, false>{});
      break;
    default:
      break;
  }
  return false;
}

}  // namespace ls::cpu::internal
