// The BF16-activation GEMM kernel (bf16_dot_gemm.h) for every target: tiles of MR activation rows ×
// NP panels; per k pair a panel is two 64-byte runs, and each row's two BF16 activations, in the
// target's form (LoadBf16X), meet them in one Bf16Dot per 16 output rows (vdpbf16ps on
// avx512_bf16, its rule with fused multiply-adds elsewhere). On AVX2, ranges of kWidenRows rows and
// more multiply widened weights instead (WidenedKernel below).
#include "kernels/cpu/bf16_dot_gemm.h"
#include "kernels/cpu/simd/vec.h"

LS_SIMD_BEGIN
namespace {
#include "kernels/cpu/simd/gemm_tiles.inc"

constexpr int64_t P = kPanelRows;
constexpr int64_t kStep = 2 * P;  // BF16 values per panel and k pair
// Weights are requested this many k pairs ahead, tall tiles the far distance (TileAhead; on an AMD
// Zen 5, d 2048 model: the 512-token prefill 4% faster, decode of 8 and 32 sequences on the same
// experts 9-17%).
constexpr int64_t kAhead = 8, kFarAhead = 64;

struct Kernel {
  static constexpr bool kWidens = false;
  static constexpr int kMaxRows = kFloatTileRows;
  static constexpr int Panels(int MR) { return FloatTilePanels(MR); }
  const Bf16Rows& x;
  const uint16_t* w;
  int64_t pairs;
  bool accumulate;

  template <int MR, int NP>
  void Tile(int64_t m0, int64_t panel, float* y, int64_t ldy, int64_t valid) const {
    V16 acc[MR][NP][2];
    for (int m = 0; m < MR; ++m)
      for (int p = 0; p < NP; ++p) acc[m][p][0] = acc[m][p][1] = Zero();
    const uint16_t* xr = x.v + m0 * x.kp;
    {
    [[maybe_unused]] const Bf16DotMode mode;  // the dot products' rounding mode, not the stores'
    for (int64_t q = 0; q < pairs; ++q) {
      const uint16_t* step[NP];
      for (int p = 0; p < NP; ++p) {
        step[p] = w + ((panel + p) * pairs + q) * kStep;
        const uint16_t* ahead = step[p] + TileAhead<MR>(kAhead, kFarAhead) * kStep;
        Prefetch(ahead);
        Prefetch(ahead + 32);
      }
      for (int m = 0; m < MR; ++m) {
        // The pair in the target's form, once for the tile's panels (a memcpy into a local here
        // made GCC keep every accumulator in memory too, a store per dot product).
        const Bf16X xpair = LoadBf16X(xr + m * x.kp + 2 * q);
        for (int p = 0; p < NP; ++p) {
          acc[m][p][0] = Bf16Dot(acc[m][p][0], step[p], xpair);
          acc[m][p][1] = Bf16Dot(acc[m][p][1], step[p] + 32, xpair);
        }
      }
    }
    }
    StoreTile<MR, NP>(acc, y, ldy, valid, accumulate);
  }
};

#if defined(LS_SIMD_BASE_AVX2)
// AVX2 (16 registers): a range of kWidenRows rows or more multiplies widened weights
// (gemm_tiles.inc) instead of splitting every pair again in each two-row tile. The rule's chain
// over a pair is k = 2q + 1, then 2q; with both k of every pair swapped, in the rows (as float32)
// and in the widened weights, the widened tiles' chain over k in order is that chain: the same
// exact products and roundings, subnormal sums flushed by the MXCSR (DotMode), the same bits.
struct WidenedKernel {
  using DotMode = Bf16DotMode;
  static constexpr int64_t kStepBytes = P * 2;  // bytes per k of a panel: a pair's 128 over its two k
  const float* x;                               // rows, pairs swapped: [M, K]
  int64_t ldx;
  const uint16_t* w;
  int64_t K;  // even
  bool accumulate;

  const char* StepAddress(int64_t panel, int64_t k) const {
    return reinterpret_cast<const char*>(w + panel * K * P) + k * kStepBytes;
  }
  // k0 and kb even: pairs k0 / 2 .. of the panel, each as its odd k's 32 columns, then its even k's.
  void WidenPanel(int64_t panel, int64_t k0, int64_t kb, float* out) const {
    const uint16_t* src = w + (panel * K + k0) * P;
    const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    for (int64_t q = 0; q < kb / 2; ++q, src += kStep, out += 2 * P)
      for (int64_t c = 0; c < P; c += 8) {  // columns c .. c + 7: their 32-bit (even, odd) pairs
        const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * c));
        _mm256_storeu_ps(out + c, _mm256_castsi256_ps(_mm256_and_si256(pairs, high)));
        _mm256_storeu_ps(out + P + c, _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16)));
      }
  }
};

// Rows [0, x.rows) through the widened weights (K: the weight's stored k, x.kp).
void WidenedBf16DotRange(const Bf16Rows& x, const uint16_t* w, int64_t K, int64_t n_begin, int64_t n_end, float* y,
                         int64_t ldy, bool accumulate) {
  const float* rows = x.swapped;
  if (!rows) {
    thread_local std::vector<float> swapped;
    swapped.resize(static_cast<size_t>(x.rows * x.kp));
    SwapPairsToF32(x.v, x.rows * x.kp, swapped.data());
    rows = swapped.data();
  }
  WidenedRange(WidenedKernel{rows, x.kp, w, K, accumulate}, x.rows, n_begin, n_end, y, ldy);
}
#endif

}  // namespace

bool Bf16DotReadsSwappedRows([[maybe_unused]] int64_t rows) {
#if defined(LS_SIMD_BASE_AVX2)
  return rows >= kWidenRows;
#else
  return false;
#endif
}

void Bf16DotRange(const Bf16Rows& x, const Tensor& t, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                  bool accumulate) {
  const int64_t pairs = t.stored_cols() / 2;
#if defined(LS_SIMD_BASE_AVX2)
  if (Bf16DotReadsSwappedRows(x.rows))
    return WidenedBf16DotRange(x, static_cast<const uint16_t*>(t.data), 2 * pairs, n_begin, n_end, y, ldy, accumulate);
#endif
  const Kernel k{x, static_cast<const uint16_t*>(t.data), pairs, accumulate};
  PanelRange(k, x.rows, n_begin, n_end, pairs * kStep * 2, y, ldy);
}

LS_SIMD_END
