// The core of CPU paged attention (attention_core.h) for every SIMD target: the query groups of one
// or more consecutive KV heads, for one token or a tile of consecutive tokens, against those KV
// heads' cached positions, over a float32 or a BF16 cache, with the head vectors held in registers
// (HV vectors of 16 lanes, HV up to 8 or 16; the last one partial when head_dim is not a multiple
// of 16; other widths from memory, the same arithmetic). Up to four query heads of a group share
// each pass over the cache, so a K or V row is loaded and widened once for them. A score is the
// 16-lane sum of the head's fused multiply-adds (dim d into lane d % 16, the first a product),
// reduced by the vector layer's tree, sixteen scores at a time; softmax with the vector layer's
// exp; the weighted sum of values in position order. A tile's tokens take the cache in blocks of
// positions, each block read from the cache once for all of them (a prefill chunk: about 1.5-2.6x
// the throughput of one token at a time); every token gets the bits it would get alone.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/cpu/attention_core.h"
#include "kernels/cpu/simd/vec.h"

LS_SIMD_BEGIN
using internal::AttendArgs;
namespace {

// `n` (of 16) cache elements from p as float32.
inline V16 LoadRow(const float* p, int n) { return n >= 16 ? Load(p) : LoadN(p, n); }
inline V16 LoadRow(const uint16_t* p, int n) { return n >= 16 ? LoadBf16(p) : LoadBf16N(p, n); }

// Cache rows are scattered over blocks (and, between layers, fall out of the core's caches):
// each loop asks for the row kPrefetchAhead positions ahead while it works on this one.
constexpr int32_t kPrefetchAhead = 32;
inline void PrefetchRow(const void* row, size_t bytes) {
  for (size_t b = 0; b < bytes; b += 64) Prefetch(static_cast<const char*>(row) + b);
}

template <int HV>
struct Head {
  int tail;  // lanes of the last vector
  int Lanes(int j) const { return j + 1 < HV ? 16 : tail; }
};

template <int HV, typename T>
inline V16 DotPartial(const Head<HV>& h, const V16 (&q)[HV], const T* k) {
  V16 acc = Mul(q[0], LoadRow(k, h.Lanes(0)));
  for (int j = 1; j < HV; ++j) acc = Fma(q[j], LoadRow(k + j * 16, h.Lanes(j)), acc);
  return acc;
}

// A tile's tokens pass over the cache in blocks of this many positions, so that the block's K or
// V rows, read from memory (or L3) by the first token, stay in L1 for the others.
constexpr int32_t kBlock = 64;

// Scores s[c][pos] = scale · q_c · k_pos for the GC query heads at qs (consecutive, head_dim
// apart) and positions p0 .. p1 − 1 (row pos at k_cache + offsets[pos]), sixteen or four positions
// per reduction (ReduceAdd16, ReduceAdd4 and ReduceAdd sum by the same tree, so the grouping does
// not change a score). Each K row is loaded (and widened) once for the GC heads; `prefetch`: ask
// for the rows of every KV head served kPrefetchAhead positions ahead. The loops are unrolled so
// that the partial sums stay in registers.
template <int HV, typename T, int GC>
void ScoreRange(const AttendArgs& a, const Head<HV>& h, const T* k_cache, const int64_t* offsets, const float* qs,
                float* const* s, int32_t p0, int32_t p1, bool prefetch) {
  const int32_t span = a.span(), hd = a.head_dim;
  V16 q[GC][HV];
#pragma GCC unroll 16
  for (int c = 0; c < GC; ++c)
#pragma GCC unroll 16
    for (int j = 0; j < HV; ++j) q[c][j] = Mul(LoadN(qs + c * hd + j * 16, h.Lanes(j)), Set(a.scale));
  // Partial sums of four positions for each head.
  auto four = [&](int32_t at, V16(&part)[GC][4]) {
#pragma GCC unroll 16
    for (int p = 0; p < 4; ++p) {
      if (prefetch && at + p + kPrefetchAhead < span)
        PrefetchRow(k_cache + offsets[at + p + kPrefetchAhead], a.kv_heads * hd * sizeof(T));
      const T* k = k_cache + offsets[at + p];
      if constexpr (GC == 1) {
        part[0][p] = DotPartial<HV>(h, q[0], k);
      } else {
        V16 kr[HV];
#pragma GCC unroll 16
        for (int j = 0; j < HV; ++j) kr[j] = LoadRow(k + j * 16, h.Lanes(j));
#pragma GCC unroll 16
        for (int c = 0; c < GC; ++c) {
          part[c][p] = Mul(q[c][0], kr[0]);
#pragma GCC unroll 16
          for (int j = 1; j < HV; ++j) part[c][p] = Fma(q[c][j], kr[j], part[c][p]);
        }
      }
    }
  };
  int32_t pos = p0;
  for (; pos + 16 <= p1; pos += 16) {  // sixteen scores a head leave in one reduction
    V16 y[GC][4];
#pragma GCC unroll 16
    for (int g4 = 0; g4 < 4; ++g4) {
      V16 part[GC][4];
      four(pos + 4 * g4, part);
#pragma GCC unroll 16
      for (int c = 0; c < GC; ++c) y[c][g4] = ReduceQuarters(part[c][0], part[c][1], part[c][2], part[c][3]);
    }
#pragma GCC unroll 16
    for (int c = 0; c < GC; ++c) ReduceAdd16(y[c][0], y[c][1], y[c][2], y[c][3], s[c] + pos);
  }
  for (; pos + 4 <= p1; pos += 4) {
    V16 part[GC][4];
    four(pos, part);
#pragma GCC unroll 16
    for (int c = 0; c < GC; ++c) ReduceAdd4(part[c][0], part[c][1], part[c][2], part[c][3], s[c] + pos);
  }
  for (; pos < p1; ++pos)
#pragma GCC unroll 16
    for (int c = 0; c < GC; ++c) s[c][pos] = ReduceAdd(DotPartial<HV>(h, q[c], k_cache + offsets[pos]));
}

// acc[c] (+)= Σ_pos p_c[pos] · v_pos over positions p0 .. p1 − 1 for GC query heads, in position
// order, each V row loaded once for them; the sums start at zero when `start`, else continue from
// acc (kept in memory between blocks: the same chain).
template <int HV, typename T, int GC>
void ValueRange(const AttendArgs& a, const Head<HV>& h, const T* v_cache, const int64_t* offsets, const float* const* s,
                float* const* acc_rows, int32_t p0, int32_t p1, bool start, bool prefetch) {
  const int32_t span = a.span(), hd = a.head_dim;
  V16 acc[GC][HV];
#pragma GCC unroll 16
  for (int c = 0; c < GC; ++c)
#pragma GCC unroll 16
    for (int j = 0; j < HV; ++j) acc[c][j] = start ? Zero() : Load(acc_rows[c] + j * 16);
  for (int32_t pos = p0; pos < p1; ++pos) {
    if (prefetch && pos + kPrefetchAhead < span)
      PrefetchRow(v_cache + offsets[pos + kPrefetchAhead], a.kv_heads * hd * sizeof(T));
    const T* v = v_cache + offsets[pos];
    V16 vr[HV];
#pragma GCC unroll 16
    for (int j = 0; j < HV; ++j) vr[j] = LoadRow(v + j * 16, h.Lanes(j));
#pragma GCC unroll 16
    for (int c = 0; c < GC; ++c) {
      const V16 p = Set(s[c][pos]);
#pragma GCC unroll 16
      for (int j = 0; j < HV; ++j) acc[c][j] = Fma(p, vr[j], acc[c][j]);
    }
  }
#pragma GCC unroll 16
  for (int c = 0; c < GC; ++c)
#pragma GCC unroll 16
    for (int j = 0; j < HV; ++j) Store(acc_rows[c] + j * 16, acc[c][j]);
}

// Softmax numerators of one query head's scores, in place; returns their sum.
inline float Softmax(float* s, int32_t ctx) {
  V16 mx = Set(-3.0e38f);
  int32_t i = 0;
  for (; i + 16 <= ctx; i += 16) mx = Max(mx, Load(s + i));
  float m = ReduceMax(mx);
  for (; i < ctx; ++i) m = s[i] > m ? s[i] : m;
  return ExpRow(s, m, s, ctx);
}

// Query heads served together by one pass over the cache: as many as registers allow (queries
// and partial scores of the group, plus one K row), dividing the group.
template <int HV>
int32_t HeadsPerPass(int32_t group) {
  if constexpr (kTileRegs >= 32) {
    if (HV <= 2 && group % 4 == 0) return 4;
    if (HV <= 4 && group % 2 == 0) return 2;
  } else {
    if (HV <= 2 && group % 2 == 0) return 2;
  }
  return 1;
}

// Where the scratch of token t, query head g (of heads()) lives.
struct TileRows {
  const AttendArgs& a;
  int32_t padded;  // head_dim rounded up to 16
  float* scores(int32_t t, int32_t g) const { return a.scores + (int64_t{t} * a.heads() + g) * a.span(); }
  float& sum(int32_t t, int32_t g) const { return a.sums[int64_t{t} * a.heads() + g]; }
  float* acc(int32_t t, int32_t g) const { return a.acc + (int64_t{t} * a.heads() + g) * padded; }
};

// Every (token, GC heads) of the tile over the positions it attends, a block of positions at a
// time: pass(t, g0, p0, p1, rows, row_offsets, prefetch) with rows at the heads' KV head; blocks in
// order, then KV heads, then tokens, so that a block of positions is read from the cache for every
// KV head served while it is at hand. A tile of several tokens copies a KV head's rows of the block
// once into contiguous float32 rows in L1 (BF16 widened: exact, so the same bits) for all its
// passes; one token reads the cache itself, its first pass over a block asking for the rows of
// every KV head ahead.
template <int HV, typename T, int GC, typename Pass>
void ForEachBlock(const AttendArgs& a, const Head<HV>& h, const T* cache, const int64_t* offsets, Pass&& pass) {
  const int32_t span = a.span(), hd = a.head_dim;
  const bool widen = a.tokens > 1;
  // A KV head's rows of the block, 64-byte aligned (on the heap: a large thread_local array would
  // take its room from every thread's stack).
  thread_local std::vector<float> wide_store;
  thread_local std::vector<int64_t> wide_offsets;
  float* wide = nullptr;
  if (widen) {
    wide_store.resize(kBlock * HV * 16 + 16);
    wide = wide_store.data() + (16 - reinterpret_cast<uintptr_t>(wide_store.data()) / 4 % 16) % 16;
    wide_offsets.resize(span);
    for (int32_t pos = 0; pos < span; ++pos) wide_offsets[pos] = pos % kBlock * HV * 16;
  }
  for (int32_t p0 = 0; p0 < span; p0 += kBlock) {
    const int32_t end = std::min(p0 + kBlock, span);
    bool first = true;
    for (int32_t kv = 0; kv < a.kv_heads; ++kv) {
      const T* rows = cache + kv * hd;
      if (widen) {
        for (int32_t pos = p0; pos < end; ++pos) {
          if (pos + kPrefetchAhead < span) PrefetchRow(rows + offsets[pos + kPrefetchAhead], hd * sizeof(T));
          for (int j = 0; j < HV; ++j)
            Store(wide + wide_offsets[pos] + j * 16, LoadRow(rows + offsets[pos] + j * 16, h.Lanes(j)));
        }
      }
      for (int32_t t = 0; t < a.tokens; ++t) {
        const int32_t p1 = std::min(end, a.len() + t);
        if (p1 <= p0) continue;
        for (int32_t g0 = kv * a.group; g0 < (kv + 1) * a.group; g0 += GC) {  // GC divides the group
          if (widen) {
            pass(t, g0, p0, p1, static_cast<const float*>(wide), wide_offsets.data(), false);
          } else {
            pass(t, g0, p0, p1, rows, offsets, first);
          }
          first = false;
        }
      }
    }
  }
}

// out = acc / sum for every token and head of the tile.
template <int HV>
void Finish(const AttendArgs& a, const Head<HV>& h, const TileRows& rows) {
  for (int32_t t = 0; t < a.tokens; ++t)
    for (int32_t g = 0; g < a.heads(); ++g) {
      const V16 inv = Set(1.f / rows.sum(t, g));
      const float* acc = rows.acc(t, g);
      float* out = a.out + t * a.token_stride + g * a.head_dim;
      for (int j = 0; j < HV; ++j) StoreN(out + j * 16, Mul(Load(acc + j * 16), inv), h.Lanes(j));
    }
}

template <int HV, typename T, int GC>
void AttendInPasses(const AttendArgs& a, const Head<HV>& h, const int64_t* offsets) {
  const TileRows rows{a, (a.head_dim + 15) / 16 * 16};
  const int32_t hd = a.head_dim;
  ForEachBlock<HV, T, GC>(
      a, h, static_cast<const T*>(a.k), offsets,
      [&](int32_t t, int32_t g0, int32_t p0, int32_t p1, const auto* k, const int64_t* off, bool prefetch) {
        float* s[GC];
        for (int c = 0; c < GC; ++c) s[c] = rows.scores(t, g0 + c);
        const float* qs = a.q + t * a.token_stride + g0 * hd;
        ScoreRange<HV, std::remove_cv_t<std::remove_pointer_t<decltype(k)>>, GC>(a, h, k, off, qs, s, p0, p1, prefetch);
      });
  for (int32_t t = 0; t < a.tokens; ++t)
    for (int32_t g = 0; g < a.heads(); ++g) rows.sum(t, g) = Softmax(rows.scores(t, g), a.len() + t);
  auto values = [&](auto heads) {
    constexpr int G = decltype(heads)::value;
    ForEachBlock<HV, T, G>(
        a, h, static_cast<const T*>(a.v), offsets,
        [&](int32_t t, int32_t g0, int32_t p0, int32_t p1, const auto* v, const int64_t* off, bool prefetch) {
          const float* s[G];
          float* acc[G];
          for (int c = 0; c < G; ++c) s[c] = rows.scores(t, g0 + c), acc[c] = rows.acc(t, g0 + c);
          ValueRange<HV, std::remove_cv_t<std::remove_pointer_t<decltype(v)>>, G>(a, h, v, off, s, acc, p0, p1, p0 == 0,
                                                                                  prefetch);
        });
  };
  // The value sums of twice the heads fit the registers where the scores' queries did not.
  if constexpr (kTileRegs >= 32 && 2 * GC * HV <= 16) {
    if (a.group % (2 * GC) == 0) {
      values(std::integral_constant<int, 2 * GC>{});
      return Finish(a, h, rows);
    }
  }
  values(std::integral_constant<int, GC>{});
  Finish(a, h, rows);
}

template <int HV, typename T>
void AttendHv(const AttendArgs& a) {
  // Cache offsets of the positions, looked up once for every query head and both passes.
  thread_local std::vector<int64_t> offsets;
  offsets.resize(a.span());
  a.ForEachPosition([&](int32_t i, int64_t off) { offsets[i] = off; });
  const Head<HV> h{a.head_dim - 16 * (HV - 1)};
  switch (HeadsPerPass<HV>(a.group)) {
    case 4:
      if constexpr (HV <= 2) return AttendInPasses<HV, T, 4>(a, h, offsets.data());
      break;
    case 2:
      if constexpr (HV <= 4) return AttendInPasses<HV, T, 2>(a, h, offsets.data());
      break;
    default:
      break;
  }
  AttendInPasses<HV, T, 1>(a, h, offsets.data());
}

template <int HV>
void AttendAny(const AttendArgs& a) {
  if (a.bf16) {
    AttendHv<HV, uint16_t>(a);
  } else {
    AttendHv<HV, float>(a);
  }
}

// Heads not held in registers (9-15 vectors, or more than 16): the same arithmetic with the query
// and the output in memory (each score the same chain of fused multiply-adds, each output lane the
// same chain over positions), one token at a time.
template <typename T>
void AttendWideToken(const AttendArgs& a) {
  const T* k_cache = static_cast<const T*>(a.k);
  const T* v_cache = static_cast<const T*>(a.v);
  const int32_t ctx = a.len(), hd = a.head_dim, hv = (hd + 15) / 16;
  auto lanes = [&](int32_t j) { return j + 1 < hv ? 16 : hd - 16 * (hv - 1); };
  thread_local std::vector<float> q;
  q.resize(static_cast<size_t>(hv) * 16);
  for (int32_t g = 0; g < a.group; ++g) {
    for (int32_t j = 0; j < hv; ++j) Store(q.data() + 16 * j, Mul(LoadN(a.q + g * hd + 16 * j, lanes(j)), Set(a.scale)));
    float* s = a.scores + static_cast<int64_t>(g) * ctx;
    a.ForEachPosition([&](int32_t i, int64_t off) {
      const T* k = k_cache + off;
      V16 acc = Mul(Load(q.data()), LoadRow(k, lanes(0)));
      for (int32_t j = 1; j < hv; ++j) acc = Fma(Load(q.data() + 16 * j), LoadRow(k + 16 * j, lanes(j)), acc);
      s[i] = ReduceAdd(acc);
    });
    a.sums[g] = Softmax(s, ctx);
    float* out = a.out + g * hd;
    for (int32_t j = 0; j < hv; ++j) {
      V16 acc = Zero();
      a.ForEachPosition([&](int32_t i, int64_t off) { acc = Fma(Set(s[i]), LoadRow(v_cache + off + 16 * j, lanes(j)), acc); });
      StoreN(out + 16 * j, Mul(acc, Set(1.f / a.sums[g])), lanes(j));
    }
  }
}
template <typename T>
void AttendWide(const AttendArgs& a) {
  for (int32_t t = 0; t < a.tokens; ++t)
    for (int32_t kv = 0; kv < a.kv_heads; ++kv) {
      AttendArgs one = a;
      one.tokens = 1;
      one.kv_heads = 1;
      one.ctx = a.ctx + t;
      one.q = a.q + t * a.token_stride + kv * a.group * a.head_dim;
      one.out = a.out + t * a.token_stride + kv * a.group * a.head_dim;
      one.k = static_cast<const T*>(a.k) + kv * a.head_dim;
      one.v = static_cast<const T*>(a.v) + kv * a.head_dim;
      AttendWideToken<T>(one);
    }
}

// Head widths held in registers: up to 8 vectors (128 values), and 16 (256); the others (and
// wider heads) take AttendWide's same arithmetic from memory.
template <int HV>
constexpr bool kHeld = HV <= 8 || HV == 16;
template <int HV>
constexpr void (*AttendEntry())(const AttendArgs&) {
  if constexpr (kHeld<HV>) {
    return &AttendAny<HV>;
  } else {
    return nullptr;
  }
}
template <int... HV>
constexpr auto MakeAttend(std::integer_sequence<int, HV...>) {
  return std::array<void (*)(const AttendArgs&), sizeof...(HV)>{{AttendEntry<HV + 1>()...}};
}

}  // namespace

void Attend(const AttendArgs& a) {
  static constexpr auto kByVectors = MakeAttend(std::make_integer_sequence<int, 16>{});
  const int32_t vectors = (a.head_dim + 15) / 16;
  if (vectors <= 16 && kByVectors[vectors - 1]) return kByVectors[vectors - 1](a);
  if (a.bf16) return AttendWide<uint16_t>(a);
  AttendWide<float>(a);
}

LS_SIMD_END
