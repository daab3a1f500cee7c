// AVX-512 microkernels of the CPU latent attention (latent_attention_core.h). Scores: blocks of
// four rows against up to four query vectors at a time, 16 partial sums per (query, row) in
// registers, each row chunk loaded once per block and reused by every query; four scores leave in
// one reduction. Weighted sums: 32 output columns of up to eight query vectors held in registers
// over a run of rows, each row chunk loaded once for all of them. BF16 rows are widened in
// register: 32 elements in one load, the even ones by a shift and the odd ones by a mask (the
// query is rearranged to match once per call; weighted sums are interleaved back when stored).
// Every loop over a template bound is unrolled by pragma, so that the accumulator arrays live in
// registers. Compiled with AVX-512 flags; only called when the CPU has AVX-512F/BW.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/exp_avx512.h"
#include "kernels/cpu/latent_attention_core.h"

namespace ls::cpu::internal {
namespace {

inline __mmask16 Mask(int32_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xffff) : left <= 0 ? 0 : static_cast<__mmask16>((1u << left) - 1u);
}

// Up to 16 elements from p as float32 (masked lanes 0).
inline __m512 Load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 Load(const uint16_t* p, __mmask16 m) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

// 32 BF16 elements (16 pairs, the last `pairs` of them masked off) as two float32 vectors: the
// even elements (lane l: element 2l) and the odd ones (lane l: element 2l + 1) — one load, a
// shift and a mask, no shuffle.
inline void LoadPairs(const uint16_t* p, __mmask16 pairs, __m512& even, __m512& odd) {
  const __m512i v = _mm512_maskz_loadu_epi32(pairs, p);
  even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

inline __m512i Indices(int first, int step) {
  alignas(64) int32_t idx[16];
  for (int l = 0; l < 16; ++l) idx[l] = first + step * l;
  return _mm512_load_si512(idx);
}

// The horizontal sums of a0..a3: for each, u_j = (a[j] + a[8+j]) + (a[4+j] + a[12+j]), then
// (u_0 + u_1) + (u_2 + u_3) — the tree the portable twin follows.
inline __m128 Sum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const __m512 x0 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44), _mm512_shuffle_f32x4(a0, a1, 0xEE));
  const __m512 x1 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44), _mm512_shuffle_f32x4(a2, a3, 0xEE));
  const __m512 y = _mm512_add_ps(_mm512_shuffle_f32x4(x0, x1, 0x88), _mm512_shuffle_f32x4(x0, x1, 0xDD));
  const __m512 z = _mm512_add_ps(y, _mm512_permute_ps(y, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512 w = _mm512_add_ps(z, _mm512_permute_ps(z, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_castps512_ps128(
      _mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), w));
}

inline void Prefetch(const void* p, size_t bytes) {
  for (size_t b = 0; b < bytes; b += 64) _mm_prefetch(static_cast<const char*>(p) + b, _MM_HINT_T0);
}

constexpr int32_t kPrefetchRows = 8;  // rows ahead that the loops ask for

// GC queries (from q) against rows ra/rb[0..3]: acc[c][r] holds 16 partial sums of each pair.
template <typename T, int GC>
inline void ScoreBlock(const float* const* qa, const float* const* qb, const T* const* ra, const T* const* rb,
                       int32_t na, int32_t nb, float scale, float* const* out, int32_t count) {
  __m512 acc[GC][4];
#pragma GCC unroll 16
  for (int c = 0; c < GC; ++c)
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) acc[c][r] = _mm512_setzero_ps();
  for (int32_t k = 0; k < na; k += 16) {
    const __mmask16 m = Mask(na - k);
    __m512 row[4];
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) row[r] = Load(ra[r] + k, m);
#pragma GCC unroll 16
    for (int c = 0; c < GC; ++c) {
      const __m512 q = _mm512_maskz_loadu_ps(m, qa[c] + k);
#pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) acc[c][r] = _mm512_fmadd_ps(q, row[r], acc[c][r]);
    }
  }
  for (int32_t k = 0; k < nb; k += 16) {
    const __mmask16 m = Mask(nb - k);
    __m512 row[4];
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) row[r] = Load(rb[r] + k, m);
#pragma GCC unroll 16
    for (int c = 0; c < GC; ++c) {
      const __m512 q = _mm512_maskz_loadu_ps(m, qb[c] + k);
#pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) acc[c][r] = _mm512_fmadd_ps(q, row[r], acc[c][r]);
    }
  }
  const __m128 sc = _mm_set1_ps(scale);
#pragma GCC unroll 16
  for (int c = 0; c < GC; ++c) {
    const __m128 s = _mm_mul_ps(Sum4(acc[c][0], acc[c][1], acc[c][2], acc[c][3]), sc);
    if (count == 4) {
      _mm_storeu_ps(out[c], s);
    } else {
      alignas(16) float tmp[4];
      _mm_store_ps(tmp, s);
      std::copy_n(tmp, count, out[c]);
    }
  }
}

// ScoreBlock over BF16 rows read as pairs (LoadPairs): qp[c] holds each 32-element chunk of the
// query as its 16 even then its 16 odd elements (zero past the part), so that lane l sums
// elements 32k + 2l and 32k + 2l + 1 in order.
template <int GC>
inline void ScorePairBlock(const float* const* qp, const uint16_t* const* ra, const uint16_t* const* rb, int32_t na,
                           int32_t nb, float scale, float* const* out, int32_t count) {
  __m512 acc[GC][4];
#pragma GCC unroll 16
  for (int c = 0; c < GC; ++c)
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) acc[c][r] = _mm512_setzero_ps();
  int32_t qo = 0;  // offset into each qp[c]
  for (int part = 0; part < 2; ++part) {
    const uint16_t* const* rows = part == 0 ? ra : rb;
    const int32_t width = part == 0 ? na : nb;
    for (int32_t k = 0; k < width; k += 32, qo += 32) {
      const __mmask16 pairs = Mask((width - k) / 2);
      __m512 even[4], odd[4];
#pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) LoadPairs(rows[r] + k, pairs, even[r], odd[r]);
#pragma GCC unroll 16
      for (int c = 0; c < GC; ++c) {
        const __m512 qe = _mm512_loadu_ps(qp[c] + qo), qd = _mm512_loadu_ps(qp[c] + qo + 16);
#pragma GCC unroll 16
        for (int r = 0; r < 4; ++r) acc[c][r] = _mm512_fmadd_ps(qd, odd[r], _mm512_fmadd_ps(qe, even[r], acc[c][r]));
      }
    }
  }
  const __m128 sc = _mm_set1_ps(scale);
#pragma GCC unroll 16
  for (int c = 0; c < GC; ++c) {
    const __m128 s = _mm_mul_ps(Sum4(acc[c][0], acc[c][1], acc[c][2], acc[c][3]), sc);
    if (count == 4) {
      _mm_storeu_ps(out[c], s);
    } else {
      alignas(16) float tmp[4];
      _mm_store_ps(tmp, s);
      std::copy_n(tmp, count, out[c]);
    }
  }
}

// The query of one head in pair order (ScorePairBlock): part a's chunks, then part b's.
inline void ToPairOrder(const float* qa, const float* qb, int32_t na, int32_t nb, float* qp) {
  for (int part = 0; part < 2; ++part) {
    const float* q = part == 0 ? qa : qb;
    const int32_t width = part == 0 ? na : nb;
    for (int32_t k = 0; k < width; k += 32, qp += 32)
      for (int32_t l = 0; l < 16; ++l) {
        qp[l] = k + 2 * l < width ? q[k + 2 * l] : 0.f;
        qp[16 + l] = k + 2 * l + 1 < width ? q[k + 2 * l + 1] : 0.f;
      }
  }
}

template <typename T>
void Scores(const float* const* qa, const float* const* qb, int32_t group, const LatentRows& rows, float scale,
            float* scores, int64_t stride) {
  thread_local std::vector<T> zeros;  // stands in for the rows past the end of a block of four
  if (zeros.size() < static_cast<size_t>(std::max(rows.na, rows.nb))) zeros.assign(std::max(rows.na, rows.nb), T{});
  const auto* A = reinterpret_cast<const T* const*>(rows.a);
  const auto* B = reinterpret_cast<const T* const*>(rows.b);
  // BF16 rows of even parts are read as pairs, the query rearranged to match once per call.
  const bool pairs = LatentPairLanes(rows);
  const int32_t pair_width = 32 * ((rows.na + 31) / 32 + (rows.nb + 31) / 32);
  thread_local std::vector<float> qp;
  if (pairs) {
    qp.resize(static_cast<size_t>(group) * pair_width);
    for (int32_t g = 0; g < group; ++g) ToPairOrder(qa[g], qb[g], rows.na, rows.nb, qp.data() + g * pair_width);
  }
  for (int32_t i = 0; i < rows.n; i += 4) {
    const int32_t count = std::min(4, rows.n - i);
    const T* ra[4];
    const T* rb[4];
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) {
      ra[r] = r < count ? A[i + r] : zeros.data();
      rb[r] = r < count && rows.nb > 0 ? B[i + r] : zeros.data();
    }
    for (int32_t j = i + kPrefetchRows; j < std::min(rows.n, i + kPrefetchRows + 4); ++j) {
      Prefetch(A[j], rows.na * sizeof(T));
      if (rows.nb > 0) Prefetch(B[j], rows.nb * sizeof(T));
    }
    for (int32_t c0 = 0; c0 < group; c0 += 4) {
      float* out[4];
      for (int c = 0; c < 4 && c0 + c < group; ++c) out[c] = scores + (c0 + c) * stride + i;
      if constexpr (std::is_same_v<T, uint16_t>) {
        if (pairs) {
          const float* q[4];
          for (int c = 0; c < 4 && c0 + c < group; ++c) q[c] = qp.data() + (c0 + c) * pair_width;
          switch (std::min(4, group - c0)) {
            case 4:
              ScorePairBlock<4>(q, ra, rb, rows.na, rows.nb, scale, out, count);
              break;
            case 3:
              ScorePairBlock<3>(q, ra, rb, rows.na, rows.nb, scale, out, count);
              break;
            case 2:
              ScorePairBlock<2>(q, ra, rb, rows.na, rows.nb, scale, out, count);
              break;
            default:
              ScorePairBlock<1>(q, ra, rb, rows.na, rows.nb, scale, out, count);
              break;
          }
          continue;
        }
      }
      switch (std::min(4, group - c0)) {
        case 4:
          ScoreBlock<T, 4>(qa + c0, qb + c0, ra, rb, rows.na, rows.nb, scale, out, count);
          break;
        case 3:
          ScoreBlock<T, 3>(qa + c0, qb + c0, ra, rb, rows.na, rows.nb, scale, out, count);
          break;
        case 2:
          ScoreBlock<T, 2>(qa + c0, qb + c0, ra, rb, rows.na, rows.nb, scale, out, count);
          break;
        default:
          ScoreBlock<T, 1>(qa + c0, qb + c0, ra, rb, rows.na, rows.nb, scale, out, count);
          break;
      }
    }
  }
}

// Rows per run of the weighted sums: the run's rows stay in L2 while every 32-column block
// passes over them; accumulators go back to `out` between runs (an exact round trip).
constexpr int32_t kValueRun = 128;

// Columns [col, col + 16·J) of GC outputs over rows [i0, i1).
template <typename T, int GC, int J>
inline void ValueBlock(const float* w, int64_t stride, const T* const* A, int32_t i0, int32_t i1, int32_t n,
                       int32_t col, int32_t width, float* const* out, const float* init, const float* post) {
  __mmask16 m[J];
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) m[j] = Mask(width - col - 16 * j);
  __m512 acc[GC][J];
#pragma GCC unroll 16
  for (int g = 0; g < GC; ++g)
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      if (i0 > 0) {
        acc[g][j] = _mm512_maskz_loadu_ps(m[j], out[g] + col + 16 * j);
      } else if (init) {
        acc[g][j] = _mm512_mul_ps(_mm512_set1_ps(init[g]), _mm512_maskz_loadu_ps(m[j], out[g] + col + 16 * j));
      } else {
        acc[g][j] = _mm512_setzero_ps();
      }
    }
  for (int32_t i = i0; i < i1; ++i) {
    if (i + 2 * kPrefetchRows < i1)
      _mm_prefetch(reinterpret_cast<const char*>(A[i + 2 * kPrefetchRows] + col), _MM_HINT_T0);
    __m512 v[J];
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) v[j] = Load(A[i] + col + 16 * j, m[j]);
#pragma GCC unroll 16
    for (int g = 0; g < GC; ++g) {
      const __m512 p = _mm512_set1_ps(w[g * stride + i]);
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) acc[g][j] = _mm512_fmadd_ps(p, v[j], acc[g][j]);
    }
  }
#pragma GCC unroll 16
  for (int g = 0; g < GC; ++g)
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      __m512 a = acc[g][j];
      if (i1 == n && post) a = _mm512_mul_ps(a, _mm512_set1_ps(post[g]));
      _mm512_mask_storeu_ps(out[g] + col + 16 * j, m[j], a);
    }
}

// ValueBlock over BF16 rows read as pairs: columns [col, col + 32) (width − col even) of GC
// outputs, held as even and odd columns and interleaved back when stored.
template <int GC>
inline void ValuePairBlock(const float* w, int64_t stride, const uint16_t* const* A, int32_t i0, int32_t i1, int32_t n,
                           int32_t col, int32_t width, float* const* out, const float* init, const float* post) {
  const __mmask16 pairs = Mask((width - col) / 2), m0 = Mask(width - col), m1 = Mask(width - col - 16);
  const __m512i even_idx = Indices(0, 2), odd_idx = Indices(1, 2);
  alignas(64) int32_t lo[16], hi[16];
  for (int l = 0; l < 8; ++l) lo[2 * l] = l, lo[2 * l + 1] = 16 + l, hi[2 * l] = 8 + l, hi[2 * l + 1] = 24 + l;
  const __m512i lo_idx = _mm512_load_si512(lo), hi_idx = _mm512_load_si512(hi);
  __m512 ev[GC], od[GC];
#pragma GCC unroll 16
  for (int g = 0; g < GC; ++g) {
    if (i0 > 0 || init) {
      const __m512 a = _mm512_maskz_loadu_ps(m0, out[g] + col), b = _mm512_maskz_loadu_ps(m1, out[g] + col + 16);
      ev[g] = _mm512_permutex2var_ps(a, even_idx, b);
      od[g] = _mm512_permutex2var_ps(a, odd_idx, b);
      if (i0 == 0) {
        const __m512 s = _mm512_set1_ps(init[g]);
        ev[g] = _mm512_mul_ps(s, ev[g]);
        od[g] = _mm512_mul_ps(s, od[g]);
      }
    } else {
      ev[g] = od[g] = _mm512_setzero_ps();
    }
  }
  for (int32_t i = i0; i < i1; ++i) {
    if (i + 2 * kPrefetchRows < i1)
      _mm_prefetch(reinterpret_cast<const char*>(A[i + 2 * kPrefetchRows] + col), _MM_HINT_T0);
    __m512 e, o;
    LoadPairs(A[i] + col, pairs, e, o);
#pragma GCC unroll 16
    for (int g = 0; g < GC; ++g) {
      const __m512 p = _mm512_set1_ps(w[g * stride + i]);
      ev[g] = _mm512_fmadd_ps(p, e, ev[g]);
      od[g] = _mm512_fmadd_ps(p, o, od[g]);
    }
  }
#pragma GCC unroll 16
  for (int g = 0; g < GC; ++g) {
    __m512 e = ev[g], o = od[g];
    if (i1 == n && post) {
      const __m512 s = _mm512_set1_ps(post[g]);
      e = _mm512_mul_ps(e, s);
      o = _mm512_mul_ps(o, s);
    }
    _mm512_mask_storeu_ps(out[g] + col, m0, _mm512_permutex2var_ps(e, lo_idx, o));
    _mm512_mask_storeu_ps(out[g] + col + 16, m1, _mm512_permutex2var_ps(e, hi_idx, o));
  }
}

template <typename T, int GC>
void ValuesGroup(const float* w, int64_t stride, const LatentRows& rows, float* const* out, const float* init,
                 const float* post) {
  const auto* A = reinterpret_cast<const T* const*>(rows.a);
  const int32_t n = rows.n, width = rows.na;
  if (n == 0) {  // no rows: init · out (or 0), times post
#pragma GCC unroll 16
    for (int g = 0; g < GC; ++g)
      for (int32_t k = 0; k < width; ++k) {
        float a = init ? init[g] * out[g][k] : 0.f;
        if (post) a *= post[g];
        out[g][k] = a;
      }
    return;
  }
  for (int32_t i0 = 0; i0 < n; i0 += kValueRun) {
    const int32_t i1 = std::min(n, i0 + kValueRun);
    for (int32_t col = 0; col < width; col += 32) {
      if constexpr (std::is_same_v<T, uint16_t>) {
        if (width % 2 == 0) {
          ValuePairBlock<GC>(w, stride, A, i0, i1, n, col, width, out, init, post);
          continue;
        }
      }
      if (width - col > 16) {
        ValueBlock<T, GC, 2>(w, stride, A, i0, i1, n, col, width, out, init, post);
      } else {
        ValueBlock<T, GC, 1>(w, stride, A, i0, i1, n, col, width, out, init, post);
      }
    }
  }
}

template <typename T>
void Values(const float* w, int64_t stride, int32_t group, const LatentRows& rows, float* const* out, const float* init,
            const float* post) {
  switch (group) {
    case 8:
      return ValuesGroup<T, 8>(w, stride, rows, out, init, post);
    case 7:
      return ValuesGroup<T, 7>(w, stride, rows, out, init, post);
    case 6:
      return ValuesGroup<T, 6>(w, stride, rows, out, init, post);
    case 5:
      return ValuesGroup<T, 5>(w, stride, rows, out, init, post);
    case 4:
      return ValuesGroup<T, 4>(w, stride, rows, out, init, post);
    case 3:
      return ValuesGroup<T, 3>(w, stride, rows, out, init, post);
    case 2:
      return ValuesGroup<T, 2>(w, stride, rows, out, init, post);
    case 1:
      return ValuesGroup<T, 1>(w, stride, rows, out, init, post);
    default:
      return;
  }
}

}  // namespace

void LatentScoresAvx512(const float* const* qa, const float* const* qb, int32_t group, const LatentRows& rows,
                        float scale, float* scores, int64_t stride) {
  if (rows.bf16) {
    Scores<uint16_t>(qa, qb, group, rows, scale, scores, stride);
  } else {
    Scores<float>(qa, qb, group, rows, scale, scores, stride);
  }
}

void LatentValuesAvx512(const float* w, int64_t stride, int32_t group, const LatentRows& rows, float* const* out,
                        const float* init, const float* post) {
  if (rows.bf16) {
    Values<uint16_t>(w, stride, group, rows, out, init, post);
  } else {
    Values<float>(w, stride, group, rows, out, init, post);
  }
}

float LatentExpSumAvx512(float* s, int32_t n, float m) {
  const __m512 mv = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int32_t i = 0; i < n; i += 16) {
    const __mmask16 k = Mask(n - i);
    const __m512 e = _mm512_maskz_mov_ps(k, Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + i), mv)));
    _mm512_mask_storeu_ps(s + i, k, e);
    sum = _mm512_add_ps(sum, e);
  }
  const __m512 zero = _mm512_setzero_ps();
  return _mm_cvtss_f32(Sum4(sum, zero, zero, zero));
}

}  // namespace ls::cpu::internal
