// AVX-512 core of CPU paged attention: one token's query group against one KV head's cached
// positions, with the head vectors held in registers (head_dim a multiple of 16, at most 256),
// over a float32 or a BF16 cache (16 BF16 values widen to float32 with one shift). Up to four
// query heads of a group share each pass over the cache, so a K or V row is loaded and widened
// once for them.
// Scores, a vectorised softmax and the weighted sum of values run inline, so a decode step
// pays no per-position function calls or accumulator round trips through memory. Compiled with
// AVX-512 flags; only called when the CPU has AVX-512F/BW.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/attention_core.h"
#include "kernels/cpu/exp_avx512.h"

namespace ls::cpu::internal {
namespace {

// The four horizontal sums of a0..a3, in order: pairs of 128-bit quarters are added across the
// four vectors first, so four dot products share one reduction.
inline __m128 Sum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const __m512 x0 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44), _mm512_shuffle_f32x4(a0, a1, 0xEE));
  const __m512 x1 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44), _mm512_shuffle_f32x4(a2, a3, 0xEE));
  // Quarter i now holds four partial sums of a_i.
  const __m512 y = _mm512_add_ps(_mm512_shuffle_f32x4(x0, x1, 0x88), _mm512_shuffle_f32x4(x0, x1, 0xDD));
  const __m512 z = _mm512_add_ps(y, _mm512_permute_ps(y, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512 w = _mm512_add_ps(z, _mm512_permute_ps(z, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), w));
}

// 16 cache elements from p as float32.
inline __m512 Load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 Load16(const uint16_t* p) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

template <int HV, typename T>
inline __m512 DotPartial(const __m512 (&q)[HV], const T* k) {
  __m512 acc = _mm512_mul_ps(q[0], Load16(k));
  for (int j = 1; j < HV; ++j) acc = _mm512_fmadd_ps(q[j], Load16(k + j * 16), acc);
  return acc;
}

// Cache rows are scattered over blocks (and, between layers, fall out of the core's caches):
// each loop asks for the row kPrefetchAhead positions ahead while it works on this one.
constexpr int32_t kPrefetchAhead = 32;
inline void PrefetchRow(const void* row, size_t bytes) {
  for (size_t b = 0; b < bytes; b += 64) _mm_prefetch(static_cast<const char*>(row) + b, _MM_HINT_T0);
}

// Scores s[g][pos] = scale · q_g · k_pos for the GC query heads g0 .. g0 + GC - 1, four positions
// per reduction. Each K row is loaded (and widened) once for the GC heads; every score is the
// same chain of operations whatever GC is.
template <int HV, typename T, int GC>
void Scores(const AttendArgs& a, const int64_t* offsets, int32_t g0) {
  const T* k_cache = static_cast<const T*>(a.k);
  const int32_t ctx = a.len();
  __m512 q[GC][HV];
  for (int c = 0; c < GC; ++c)
    for (int j = 0; j < HV; ++j)
      q[c][j] = _mm512_mul_ps(_mm512_loadu_ps(a.q + (g0 + c) * HV * 16 + j * 16), _mm512_set1_ps(a.scale));
  float* s[GC];
  for (int c = 0; c < GC; ++c) s[c] = a.scores + static_cast<int64_t>(g0 + c) * ctx;
  int32_t pos = 0;
  for (; pos + 4 <= ctx; pos += 4) {
    __m512 part[GC][4];
    for (int p = 0; p < 4; ++p) {
      if (pos + p + kPrefetchAhead < ctx) PrefetchRow(k_cache + offsets[pos + p + kPrefetchAhead], HV * 16 * sizeof(T));
      const T* k = k_cache + offsets[pos + p];
      if constexpr (GC == 1) {
        part[0][p] = DotPartial<HV>(q[0], k);
      } else {
        __m512 kr[HV];
        for (int j = 0; j < HV; ++j) kr[j] = Load16(k + j * 16);
        for (int c = 0; c < GC; ++c) {
          part[c][p] = _mm512_mul_ps(q[c][0], kr[0]);
          for (int j = 1; j < HV; ++j) part[c][p] = _mm512_fmadd_ps(q[c][j], kr[j], part[c][p]);
        }
      }
    }
    for (int c = 0; c < GC; ++c) _mm_storeu_ps(s[c] + pos, Sum4(part[c][0], part[c][1], part[c][2], part[c][3]));
  }
  for (; pos < ctx; ++pos)
    for (int c = 0; c < GC; ++c) s[c][pos] = _mm512_reduce_add_ps(DotPartial<HV>(q[c], k_cache + offsets[pos]));
}

// out[g] = Σ_pos p_g[pos] · v_pos / sum_g for the GC query heads from g0, each V row loaded once.
template <int HV, typename T, int GC>
void Values(const AttendArgs& a, const int64_t* offsets, int32_t g0) {
  const T* v_cache = static_cast<const T*>(a.v);
  const int32_t ctx = a.len();
  const float* s[GC];
  __m512 acc[GC][HV];
  for (int c = 0; c < GC; ++c) {
    s[c] = a.scores + static_cast<int64_t>(g0 + c) * ctx;
    for (int j = 0; j < HV; ++j) acc[c][j] = _mm512_setzero_ps();
  }
  for (int32_t pos = 0; pos < ctx; ++pos) {
    if (pos + kPrefetchAhead < ctx) PrefetchRow(v_cache + offsets[pos + kPrefetchAhead], HV * 16 * sizeof(T));
    const T* v = v_cache + offsets[pos];
    if constexpr (GC == 1) {
      const __m512 p = _mm512_set1_ps(s[0][pos]);
      for (int j = 0; j < HV; ++j) acc[0][j] = _mm512_fmadd_ps(p, Load16(v + j * 16), acc[0][j]);
    } else {
      __m512 vr[HV];
      for (int j = 0; j < HV; ++j) vr[j] = Load16(v + j * 16);
      for (int c = 0; c < GC; ++c) {
        const __m512 p = _mm512_set1_ps(s[c][pos]);
        for (int j = 0; j < HV; ++j) acc[c][j] = _mm512_fmadd_ps(p, vr[j], acc[c][j]);
      }
    }
  }
  for (int c = 0; c < GC; ++c) {
    const __m512 inv = _mm512_set1_ps(1.f / a.sums[g0 + c]);
    for (int j = 0; j < HV; ++j) _mm512_storeu_ps(a.out + (g0 + c) * HV * 16 + j * 16, _mm512_mul_ps(acc[c][j], inv));
  }
}

// Softmax numerators of one query head's scores, in place; returns their sum.
inline float Softmax(float* s, int32_t ctx) {
  __m512 mx = _mm512_set1_ps(-3.0e38f);
  for (int32_t i = 0; i < ctx; i += 16) {
    const __mmask16 m = ctx - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (ctx - i)) - 1u);
    mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, s + i));
  }
  const __m512 mv = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int32_t i = 0; i < ctx; i += 16) {
    const __mmask16 m = ctx - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (ctx - i)) - 1u);
    const __m512 e = _mm512_maskz_mov_ps(m, Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + i), mv)));
    _mm512_mask_storeu_ps(s + i, m, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

// Query heads served together by one pass over the cache: as many as registers allow (queries
// and partial scores of the group, plus one K row), dividing the group.
template <int HV>
int32_t HeadsPerPass(int32_t group) {
  if constexpr (HV <= 2) {
    if (group % 4 == 0) return 4;
  }
  if constexpr (HV <= 4) {
    if (group % 2 == 0) return 2;
  }
  return 1;
}

template <int HV, typename T, int GC>
void AttendInPasses(const AttendArgs& a, const int64_t* offsets) {
  for (int32_t g0 = 0; g0 < a.group; g0 += GC) Scores<HV, T, GC>(a, offsets, g0);
  for (int32_t g = 0; g < a.group; ++g) a.sums[g] = Softmax(a.scores + static_cast<int64_t>(g) * a.len(), a.len());
  for (int32_t g0 = 0; g0 < a.group; g0 += GC) Values<HV, T, GC>(a, offsets, g0);
}

template <int HV, typename T>  // HV = head_dim / 16; T: the cache element, float or BF16 bits
void Attend(const AttendArgs& a) {
  // Cache offsets of the positions, looked up once for every query head and both passes.
  thread_local std::vector<int64_t> offsets;
  offsets.resize(a.len());
  a.ForEachPosition([&](int32_t i, int64_t off) { offsets[i] = off; });
  switch (HeadsPerPass<HV>(a.group)) {
    case 4:
      if constexpr (HV <= 2) return AttendInPasses<HV, T, 4>(a, offsets.data());
      break;
    case 2:
      if constexpr (HV <= 4) return AttendInPasses<HV, T, 2>(a, offsets.data());
      break;
    default:
      break;
  }
  AttendInPasses<HV, T, 1>(a, offsets.data());
}

template <int HV>
void AttendAny(const AttendArgs& a) {
  if (a.bf16) {
    Attend<HV, uint16_t>(a);
  } else {
    Attend<HV, float>(a);
  }
}

}  // namespace

bool AttendAvx512(const AttendArgs& a) {
  switch (a.head_dim) {
    case 64: AttendAny<4>(a); return true;
    case 128: AttendAny<8>(a); return true;
    case 256: AttendAny<16>(a); return true;
    default:
      if (a.head_dim % 16 != 0 || a.head_dim > 256) return false;
  }
  switch (a.head_dim / 16) {
    case 1: AttendAny<1>(a); return true;
    case 2: AttendAny<2>(a); return true;
    case 3: AttendAny<3>(a); return true;
    case 5: AttendAny<5>(a); return true;
    case 6: AttendAny<6>(a); return true;
    case 7: AttendAny<7>(a); return true;
    default: return false;  // 144-240: the portable path
  }
}

}  // namespace ls::cpu::internal
