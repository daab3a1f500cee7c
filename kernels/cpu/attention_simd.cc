// The core of CPU paged attention (attention_core.h) for every SIMD target: one token's query
// group against one KV head's cached positions, over a float32 or a BF16 cache, with the head
// vectors held in registers (HV vectors of 16 lanes, HV up to 8 or 16; the last one partial when
// head_dim is not a multiple of 16; other widths from memory, the same arithmetic). Up to four query heads of a group share each pass over the cache, so a K or V
// row is loaded and widened once for them. A score is the 16-lane sum of the head's fused
// multiply-adds (dim d into lane d % 16, the first a product), reduced by the vector layer's tree;
// softmax with the vector layer's exp; the weighted sum of values in position order.
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

// Scores s[g][pos] = scale · q_g · k_pos for the GC query heads g0 .. g0 + GC − 1, four positions
// per reduction. Each K row is loaded (and widened) once for the GC heads.
template <int HV, typename T, int GC>
void Scores(const AttendArgs& a, const Head<HV>& h, const int64_t* offsets, int32_t g0) {
  const T* k_cache = static_cast<const T*>(a.k);
  const int32_t ctx = a.len(), hd = a.head_dim;
  V16 q[GC][HV];
  for (int c = 0; c < GC; ++c)
    for (int j = 0; j < HV; ++j) q[c][j] = Mul(LoadN(a.q + (g0 + c) * hd + j * 16, h.Lanes(j)), Set(a.scale));
  float* s[GC];
  for (int c = 0; c < GC; ++c) s[c] = a.scores + static_cast<int64_t>(g0 + c) * ctx;
  int32_t pos = 0;
  for (; pos + 4 <= ctx; pos += 4) {
    V16 part[GC][4];
    for (int p = 0; p < 4; ++p) {
      if (pos + p + kPrefetchAhead < ctx) PrefetchRow(k_cache + offsets[pos + p + kPrefetchAhead], hd * sizeof(T));
      const T* k = k_cache + offsets[pos + p];
      if constexpr (GC == 1) {
        part[0][p] = DotPartial<HV>(h, q[0], k);
      } else {
        V16 kr[HV];
        for (int j = 0; j < HV; ++j) kr[j] = LoadRow(k + j * 16, h.Lanes(j));
        for (int c = 0; c < GC; ++c) {
          part[c][p] = Mul(q[c][0], kr[0]);
          for (int j = 1; j < HV; ++j) part[c][p] = Fma(q[c][j], kr[j], part[c][p]);
        }
      }
    }
    for (int c = 0; c < GC; ++c) ReduceAdd4(part[c][0], part[c][1], part[c][2], part[c][3], s[c] + pos);
  }
  for (; pos < ctx; ++pos)
    for (int c = 0; c < GC; ++c) s[c][pos] = ReduceAdd(DotPartial<HV>(h, q[c], k_cache + offsets[pos]));
}

// out[g] = Σ_pos p_g[pos] · v_pos / sum_g for the GC query heads from g0, each V row loaded once.
template <int HV, typename T, int GC>
void Values(const AttendArgs& a, const Head<HV>& h, const int64_t* offsets, int32_t g0) {
  const T* v_cache = static_cast<const T*>(a.v);
  const int32_t ctx = a.len(), hd = a.head_dim;
  const float* s[GC];
  V16 acc[GC][HV];
  for (int c = 0; c < GC; ++c) {
    s[c] = a.scores + static_cast<int64_t>(g0 + c) * ctx;
    for (int j = 0; j < HV; ++j) acc[c][j] = Zero();
  }
  for (int32_t pos = 0; pos < ctx; ++pos) {
    if (pos + kPrefetchAhead < ctx) PrefetchRow(v_cache + offsets[pos + kPrefetchAhead], hd * sizeof(T));
    const T* v = v_cache + offsets[pos];
    V16 vr[HV];
    for (int j = 0; j < HV; ++j) vr[j] = LoadRow(v + j * 16, h.Lanes(j));
    for (int c = 0; c < GC; ++c) {
      const V16 p = Set(s[c][pos]);
      for (int j = 0; j < HV; ++j) acc[c][j] = Fma(p, vr[j], acc[c][j]);
    }
  }
  for (int c = 0; c < GC; ++c) {
    const V16 inv = Set(1.f / a.sums[g0 + c]);
    for (int j = 0; j < HV; ++j) StoreN(a.out + (g0 + c) * hd + j * 16, Mul(acc[c][j], inv), h.Lanes(j));
  }
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

template <int HV, typename T, int GC>
void AttendInPasses(const AttendArgs& a, const Head<HV>& h, const int64_t* offsets) {
  for (int32_t g0 = 0; g0 < a.group; g0 += GC) Scores<HV, T, GC>(a, h, offsets, g0);
  for (int32_t g = 0; g < a.group; ++g) a.sums[g] = Softmax(a.scores + static_cast<int64_t>(g) * a.len(), a.len());
  for (int32_t g0 = 0; g0 < a.group; g0 += GC) Values<HV, T, GC>(a, h, offsets, g0);
}

template <int HV, typename T>
void AttendHv(const AttendArgs& a) {
  // Cache offsets of the positions, looked up once for every query head and both passes.
  thread_local std::vector<int64_t> offsets;
  offsets.resize(a.len());
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
// same chain over positions).
template <typename T>
void AttendWide(const AttendArgs& a) {
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
