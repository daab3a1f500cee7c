// AVX512-BF16 kernel of the BF16-activation GEMM: tiles of MR activation rows × NP panels; per k
// pair a panel is two 64-byte loads, and each row's two BF16 activations, broadcast as one 32-bit
// value, meet them in one vdpbf16ps per 16 output rows (bf16_dot_gemm.h). Compiled with
// AVX512-BF16 flags; only called when the CPU reports AVX512-BF16.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/bf16_dot_gemm.h"
#include "kernels/cpu/avx512_tile_store.h"

namespace ls::cpu::internal {
namespace {

constexpr int64_t P = kPanelRows;
constexpr int64_t kStep = 2 * P;  // BF16 values per panel and k pair

inline __m512bh Broadcast(const uint16_t* pair) {
  int32_t v;
  std::memcpy(&v, pair, 4);
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(v));
}

inline __m512bh Load(const uint16_t* w) { return reinterpret_cast<__m512bh>(_mm512_loadu_si512(w)); }

// Weights are requested this many k pairs ahead (see packed_gemm_avx512.cc).
constexpr int64_t kAhead = 8;

template <int MR, int NP>
void Tile(const Bf16Rows& x, int64_t m0, const uint16_t* w, int64_t pairs, int64_t panel, float* y, int64_t ldy,
          int64_t valid, bool accumulate) {
  __m512 acc[MR][NP][2];
  for (int m = 0; m < MR; ++m)
    for (int p = 0; p < NP; ++p) acc[m][p][0] = acc[m][p][1] = _mm512_setzero_ps();
  const uint16_t* xr = x.v + m0 * x.kp;
  for (int64_t q = 0; q < pairs; ++q) {
    __m512bh lo[NP], hi[NP];
    for (int p = 0; p < NP; ++p) {
      const uint16_t* step = w + ((panel + p) * pairs + q) * kStep;
      _mm_prefetch(reinterpret_cast<const char*>(step + kAhead * kStep), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(step + kAhead * kStep + 32), _MM_HINT_T0);
      lo[p] = Load(step);
      hi[p] = Load(step + 32);
    }
    for (int m = 0; m < MR; ++m) {
      const __m512bh xb = Broadcast(xr + m * x.kp + 2 * q);
      for (int p = 0; p < NP; ++p) {
        acc[m][p][0] = _mm512_dpbf16_ps(acc[m][p][0], xb, lo[p]);
        acc[m][p][1] = _mm512_dpbf16_ps(acc[m][p][1], xb, hi[p]);
      }
    }
  }
  StoreTile<MR, NP>(acc, y, ldy, valid, accumulate);
}

// Panels per tile: as many as keep the accumulators and loaded weights within 32 registers.
constexpr int PanelsFor(int MR) { return MR <= 2 ? 4 : MR <= 4 ? 3 : MR <= 6 ? 2 : 1; }

template <int MR>
void Rows(const Bf16Rows& x, int64_t m0, const uint16_t* w, int64_t pairs, int64_t p_begin, int64_t p_end,
          int64_t n_begin, int64_t n_end, float* y, int64_t ldy, bool accumulate) {
  constexpr int NP = PanelsFor(MR);
  auto tile = [&](auto np, int64_t p) {
    Tile<MR, decltype(np)::value>(x, m0, w, pairs, p, y + (p * P - n_begin), ldy, n_end - p * P, accumulate);
  };
  int64_t p = p_begin;
  for (; p + NP <= p_end; p += NP) tile(std::integral_constant<int, NP>{}, p);
  switch (p_end - p) {
    case 3: tile(std::integral_constant<int, (NP < 3 ? NP : 3)>{}, p); break;
    case 2: tile(std::integral_constant<int, (NP < 2 ? NP : 2)>{}, p); break;
    case 1: tile(std::integral_constant<int, 1>{}, p); break;
    default: break;
  }
}

using RowsFn = void (*)(const Bf16Rows&, int64_t, const uint16_t*, int64_t, int64_t, int64_t, int64_t, int64_t,
                        float*, int64_t, bool);
constexpr RowsFn kRows[13] = {nullptr,  Rows<1>, Rows<2>, Rows<3>,  Rows<4>,  Rows<5>, Rows<6>,
                              Rows<7>,  Rows<8>, Rows<9>, Rows<10>, Rows<11>, Rows<12>};

}  // namespace

bool CpuHasAvx512Bf16() {
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512f");
}

bool Bf16DotRangeAvx512(const Bf16Rows& x, const Tensor& t, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                        bool accumulate) {
  static const bool has_bf16 = CpuHasAvx512Bf16();
  if (!has_bf16) return false;
  const auto* w = static_cast<const uint16_t*>(t.data);
  const int64_t pairs = t.stored_cols() / 2;
  constexpr int64_t kMaxRows = 12;
  // Panels in groups that stay in the L2 cache while every row block passes over them.
  const int64_t group = std::max<int64_t>(4, (int64_t{256} << 10) / std::max<int64_t>(1, pairs * kStep * 2));
  const int64_t p_first = n_begin / P, p_last = (n_end + P - 1) / P;
  for (int64_t g = p_first; g < p_last; g += group) {
    const int64_t g_end = std::min(p_last, g + group);
    for (int64_t m = 0; m < x.rows; m += kMaxRows) {
      const int64_t rows = std::min(kMaxRows, x.rows - m);
      kRows[rows](x, m, w, pairs, g, g_end, n_begin, n_end, y + m * ldy, ldy, accumulate);
    }
  }
  return true;
}

}  // namespace ls::cpu::internal
