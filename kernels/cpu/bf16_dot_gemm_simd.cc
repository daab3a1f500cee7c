// The BF16-activation GEMM kernel (bf16_dot_gemm.h) for every target: tiles of MR activation rows ×
// NP panels; per k pair a panel is two 64-byte runs, and each row's two BF16 activations, broadcast
// as one 32-bit value, meet them in one Bf16Dot per 16 output rows (vdpbf16ps on avx512_bf16, its
// rule with fused multiply-adds elsewhere).
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
        // The pair as one 32-bit value (one load); a memcpy into a local here made GCC keep every
        // accumulator in memory too, a store per dot product.
        const uint16_t* xp = xr + m * x.kp + 2 * q;
        const uint32_t xpair = xp[0] | static_cast<uint32_t>(xp[1]) << 16;
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

}  // namespace

void Bf16DotRange(const Bf16Rows& x, const Tensor& t, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                  bool accumulate) {
  const int64_t pairs = t.stored_cols() / 2;
  const Kernel k{x, static_cast<const uint16_t*>(t.data), pairs, accumulate};
  PanelRange(k, x.rows, n_begin, n_end, pairs * kStep * 2, y, ldy);
}

LS_SIMD_END
