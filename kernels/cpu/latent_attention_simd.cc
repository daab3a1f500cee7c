// The latent attention microkernels (latent_attention_core.h) for every SIMD target. Scores:
// blocks of four rows against up to four query vectors at a time, 16 partial sums per (query, row),
// each row chunk loaded once per block and reused by every query; four scores leave in one
// reduction. Weighted sums: 32 output columns of up to eight query vectors over a run of rows,
// each row chunk loaded once for all of them. BF16 rows are widened in register: 32 elements at
// once, the even ones and the odd ones to separate vectors (the query rearranged to match once
// per call; weighted sums are interleaved back when stored).
#include <vector>

#include "kernels/cpu/latent_attention_core.h"
#include "kernels/cpu/simd/vec.h"

LS_SIMD_BEGIN
using internal::LatentPairLanes;
using internal::LatentRows;
namespace {

inline int Lanes(int32_t left) { return left >= 16 ? 16 : left <= 0 ? 0 : left; }
inline V16 LoadRow(const float* p, int n) { return LoadN(p, n); }
inline V16 LoadRow(const uint16_t* p, int n) { return LoadBf16N(p, n); }

inline void PrefetchBytes(const void* p, size_t bytes) {
  for (size_t b = 0; b < bytes; b += 64) Prefetch(static_cast<const char*>(p) + b);
}

constexpr int32_t kPrefetchRows = 8;  // rows ahead that the loops ask for

inline void StoreScores(const float* sums, float scale, float* out, int32_t count) {
  for (int32_t r = 0; r < count; ++r) out[r] = sums[r] * scale;
}

// GC queries (from q) against rows ra/rb[0..3]: acc[c][r] holds 16 partial sums of each pair.
template <typename T, int GC>
inline void ScoreBlock(const float* const* qa, const float* const* qb, const T* const* ra, const T* const* rb,
                       int32_t na, int32_t nb, float scale, float* const* out, int32_t count) {
  V16 acc[GC][4];
#pragma GCC unroll 16
  for (int c = 0; c < GC; ++c)
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) acc[c][r] = Zero();
  for (int part = 0; part < 2; ++part) {
    const T* const* rows = part == 0 ? ra : rb;
    const float* const* q = part == 0 ? qa : qb;
    const int32_t width = part == 0 ? na : nb;
    for (int32_t k = 0; k < width; k += 16) {
      const int n = Lanes(width - k);
      V16 row[4];
#pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) row[r] = LoadRow(rows[r] + k, n);
#pragma GCC unroll 16
      for (int c = 0; c < GC; ++c) {
        const V16 qv = LoadN(q[c] + k, n);
#pragma GCC unroll 16
        for (int r = 0; r < 4; ++r) acc[c][r] = Fma(qv, row[r], acc[c][r]);
      }
    }
  }
#pragma GCC unroll 16
  for (int c = 0; c < GC; ++c) {
    float sums[4];
    ReduceAdd4(acc[c][0], acc[c][1], acc[c][2], acc[c][3], sums);
    StoreScores(sums, scale, out[c], count);
  }
}

// ScoreBlock over BF16 rows read as pairs (LoadBf16Pairs): qp[c] holds each 32-element chunk of
// the query as its 16 even then its 16 odd elements (zero past the part), so that lane l sums
// elements 32k + 2l and 32k + 2l + 1 in order.
template <int GC>
inline void ScorePairBlock(const float* const* qp, const uint16_t* const* ra, const uint16_t* const* rb, int32_t na,
                           int32_t nb, float scale, float* const* out, int32_t count) {
  V16 acc[GC][4];
#pragma GCC unroll 16
  for (int c = 0; c < GC; ++c)
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) acc[c][r] = Zero();
  int32_t qo = 0;  // offset into each qp[c]
  for (int part = 0; part < 2; ++part) {
    const uint16_t* const* rows = part == 0 ? ra : rb;
    const int32_t width = part == 0 ? na : nb;
    for (int32_t k = 0; k < width; k += 32, qo += 32) {
      const int pairs = Lanes((width - k) / 2);
      V16 even[4], odd[4];
#pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) LoadBf16Pairs(rows[r] + k, pairs, &even[r], &odd[r]);
#pragma GCC unroll 16
      for (int c = 0; c < GC; ++c) {
        const V16 qe = Load(qp[c] + qo), qd = Load(qp[c] + qo + 16);
#pragma GCC unroll 16
        for (int r = 0; r < 4; ++r) acc[c][r] = Fma(qd, odd[r], Fma(qe, even[r], acc[c][r]));
      }
    }
  }
#pragma GCC unroll 16
  for (int c = 0; c < GC; ++c) {
    float sums[4];
    ReduceAdd4(acc[c][0], acc[c][1], acc[c][2], acc[c][3], sums);
    StoreScores(sums, scale, out[c], count);
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
    for (int r = 0; r < 4; ++r) {
      ra[r] = r < count ? A[i + r] : zeros.data();
      rb[r] = r < count && rows.nb > 0 ? B[i + r] : zeros.data();
    }
    for (int32_t j = i + kPrefetchRows; j < std::min(rows.n, i + kPrefetchRows + 4); ++j) {
      PrefetchBytes(A[j], rows.na * sizeof(T));
      if (rows.nb > 0) PrefetchBytes(B[j], rows.nb * sizeof(T));
    }
    for (int32_t c0 = 0; c0 < group; c0 += 4) {
      float* out[4];
      for (int c = 0; c < 4 && c0 + c < group; ++c) out[c] = scores + (c0 + c) * stride + i;
      const int gc = std::min(4, group - c0);
      if constexpr (std::is_same_v<T, uint16_t>) {
        if (pairs) {
          const float* q[4];
          for (int c = 0; c < gc; ++c) q[c] = qp.data() + (c0 + c) * pair_width;
          switch (gc) {
            case 4: ScorePairBlock<4>(q, ra, rb, rows.na, rows.nb, scale, out, count); break;
            case 3: ScorePairBlock<3>(q, ra, rb, rows.na, rows.nb, scale, out, count); break;
            case 2: ScorePairBlock<2>(q, ra, rb, rows.na, rows.nb, scale, out, count); break;
            default: ScorePairBlock<1>(q, ra, rb, rows.na, rows.nb, scale, out, count); break;
          }
          continue;
        }
      }
      switch (gc) {
        case 4: ScoreBlock<T, 4>(qa + c0, qb + c0, ra, rb, rows.na, rows.nb, scale, out, count); break;
        case 3: ScoreBlock<T, 3>(qa + c0, qb + c0, ra, rb, rows.na, rows.nb, scale, out, count); break;
        case 2: ScoreBlock<T, 2>(qa + c0, qb + c0, ra, rb, rows.na, rows.nb, scale, out, count); break;
        default: ScoreBlock<T, 1>(qa + c0, qb + c0, ra, rb, rows.na, rows.nb, scale, out, count); break;
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
  int m[J];
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) m[j] = Lanes(width - col - 16 * j);
  V16 acc[GC][J];
#pragma GCC unroll 16
  for (int g = 0; g < GC; ++g)
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      if (i0 > 0) {
        acc[g][j] = LoadN(out[g] + col + 16 * j, m[j]);
      } else if (init) {
        acc[g][j] = Mul(Set(init[g]), LoadN(out[g] + col + 16 * j, m[j]));
      } else {
        acc[g][j] = Zero();
      }
    }
  for (int32_t i = i0; i < i1; ++i) {
    if (i + 2 * kPrefetchRows < i1) Prefetch(A[i + 2 * kPrefetchRows] + col);
    V16 v[J];
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) v[j] = LoadRow(A[i] + col + 16 * j, m[j]);
#pragma GCC unroll 16
    for (int g = 0; g < GC; ++g) {
      const V16 p = Set(w[g * stride + i]);
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) acc[g][j] = Fma(p, v[j], acc[g][j]);
    }
  }
#pragma GCC unroll 16
  for (int g = 0; g < GC; ++g)
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      V16 a = acc[g][j];
      if (i1 == n && post) a = Mul(a, Set(post[g]));
      StoreN(out[g] + col + 16 * j, a, m[j]);
    }
}

// ValueBlock over BF16 rows read as pairs: columns [col, col + 32) (width − col even) of GC
// outputs, held as even and odd columns and interleaved back when stored.
template <int GC>
inline void ValuePairBlock(const float* w, int64_t stride, const uint16_t* const* A, int32_t i0, int32_t i1, int32_t n,
                           int32_t col, int32_t width, float* const* out, const float* init, const float* post) {
  const int pairs = Lanes((width - col) / 2), m0 = Lanes(width - col), m1 = Lanes(width - col - 16);
  V16 ev[GC], od[GC];
#pragma GCC unroll 16
  for (int g = 0; g < GC; ++g) {
    if (i0 > 0 || init) {
      Deinterleave(LoadN(out[g] + col, m0), LoadN(out[g] + col + 16, m1), &ev[g], &od[g]);
      if (i0 == 0) {
        const V16 s = Set(init[g]);
        ev[g] = Mul(s, ev[g]);
        od[g] = Mul(s, od[g]);
      }
    } else {
      ev[g] = od[g] = Zero();
    }
  }
  for (int32_t i = i0; i < i1; ++i) {
    if (i + 2 * kPrefetchRows < i1) Prefetch(A[i + 2 * kPrefetchRows] + col);
    V16 e, o;
    LoadBf16Pairs(A[i] + col, pairs, &e, &o);
#pragma GCC unroll 16
    for (int g = 0; g < GC; ++g) {
      const V16 p = Set(w[g * stride + i]);
      ev[g] = Fma(p, e, ev[g]);
      od[g] = Fma(p, o, od[g]);
    }
  }
#pragma GCC unroll 16
  for (int g = 0; g < GC; ++g) {
    V16 e = ev[g], o = od[g];
    if (i1 == n && post) {
      const V16 s = Set(post[g]);
      e = Mul(e, s);
      o = Mul(o, s);
    }
    V16 lo, hi;
    Interleave(e, o, &lo, &hi);
    StoreN(out[g] + col, lo, m0);
    StoreN(out[g] + col + 16, hi, m1);
  }
}

template <typename T, int GC>
void ValuesGroup(const float* w, int64_t stride, const LatentRows& rows, float* const* out, const float* init,
                 const float* post) {
  const auto* A = reinterpret_cast<const T* const*>(rows.a);
  const int32_t n = rows.n, width = rows.na;
  if (n == 0) {  // no rows: init · out (or 0), times post
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
    case 8: return ValuesGroup<T, 8>(w, stride, rows, out, init, post);
    case 7: return ValuesGroup<T, 7>(w, stride, rows, out, init, post);
    case 6: return ValuesGroup<T, 6>(w, stride, rows, out, init, post);
    case 5: return ValuesGroup<T, 5>(w, stride, rows, out, init, post);
    case 4: return ValuesGroup<T, 4>(w, stride, rows, out, init, post);
    case 3: return ValuesGroup<T, 3>(w, stride, rows, out, init, post);
    case 2: return ValuesGroup<T, 2>(w, stride, rows, out, init, post);
    case 1: return ValuesGroup<T, 1>(w, stride, rows, out, init, post);
    default: return;
  }
}

}  // namespace

void LatentScores(const float* const* qa, const float* const* qb, int32_t group, const LatentRows& rows, float scale,
                  float* scores, int64_t stride) {
  if (rows.bf16) return Scores<uint16_t>(qa, qb, group, rows, scale, scores, stride);
  Scores<float>(qa, qb, group, rows, scale, scores, stride);
}

void LatentValues(const float* w, int64_t stride, int32_t group, const LatentRows& rows, float* const* out,
                  const float* init, const float* post) {
  if (rows.bf16) return Values<uint16_t>(w, stride, group, rows, out, init, post);
  Values<float>(w, stride, group, rows, out, init, post);
}

LS_SIMD_END
