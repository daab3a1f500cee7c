// The packed-GEMM kernel (packed_gemm.h) for every SIMD target: tiles of MR activation rows × NP
// panels (32 output columns each). Per k step a tile widens NP panel runs to float32 once and
// issues MR · NP · 2 fused multiply-adds of 16 lanes against broadcast activations; each lane of
// an accumulator is one output element, summed in k order from zero.
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/simd/vec.h"

LS_SIMD_BEGIN
namespace {
#include "kernels/cpu/simd/gemm_tiles.inc"

constexpr int64_t P = kPanelRows;

// One k step of a panel as two float32 vectors: rows 0-15 and rows 16-31 (BF16 panels interleave
// their rows so that the even elements are rows 0-15).
template <DType T>
inline void LoadStep(const void* w, int64_t i, V16* lo, V16* hi) {
  if constexpr (T == DType::kBF16) {
    LoadBf16Pairs(static_cast<const uint16_t*>(w) + i, 16, lo, hi);
  } else if constexpr (T == DType::kF16) {
    *lo = LoadF16(static_cast<const uint16_t*>(w) + i);
    *hi = LoadF16(static_cast<const uint16_t*>(w) + i + 16);
  } else {
    *lo = Load(static_cast<const float*>(w) + i);
    *hi = Load(static_cast<const float*>(w) + i + 16);
  }
}

// Weights are requested this many k steps ahead, so that a tile's stream arrives before it is
// needed (the hardware prefetcher ramps up again on every new panel and expert); the address may
// lie past the panel: a prefetch never faults.
// Tall tiles (AVX-512) use the far distance (TileAhead; on an AMD Zen 5, d 2048 model, BF16 weights:
// the 512-token prefill 6% faster, decode of 8 and 32 sequences on the same experts 8-19%).
constexpr int64_t kAhead = 16, kFarAhead = 64;

template <DType T>
struct Kernel {
  static constexpr int kMaxRows = kFloatTileRows;
  static constexpr int Panels(int MR) { return FloatTilePanels(MR); }
  static constexpr bool kWidens = true;  // F32 panels are copied as they are
  const float* x;
  int64_t ldx;
  const void* w;
  int64_t K;
  bool accumulate;

  // The bytes of one k step of a panel, and where step k of panel `panel` starts.
  static constexpr int64_t kStepBytes = P * static_cast<int64_t>(DTypeSize(T));
  const char* StepAddress(int64_t panel, int64_t k) const {
    return static_cast<const char*>(w) + (panel * K + k) * kStepBytes;
  }
  // Rows k0 .. k0 + kb − 1 of panel `panel` as float32 [kb][32], rows in order.
  void WidenPanel(int64_t panel, int64_t k0, int64_t kb, float* out) const {
    // One moving source and destination: the step's address is not recomputed from the panel.
    const char* src = StepAddress(panel, k0);
    for (int64_t k = 0; k < kb; ++k, src += kStepBytes, out += P) {
      V16 lo, hi;
      LoadStep<T>(src, 0, &lo, &hi);
      Store(out, lo);
      Store(out + 16, hi);
    }
  }

  template <int MR, int NP>
  void Tile(int64_t m0, int64_t panel, float* y, int64_t ldy, int64_t valid) const {
    V16 acc[MR][NP][2];
    for (int m = 0; m < MR; ++m)
      for (int p = 0; p < NP; ++p) acc[m][p][0] = acc[m][p][1] = Zero();
    const float* xr = x + m0 * ldx;
    for (int64_t k = 0; k < K; ++k) {
      V16 lo[NP], hi[NP];
      for (int p = 0; p < NP; ++p) {
        const int64_t at = ((panel + p) * K + k) * P;
        const char* ahead = static_cast<const char*>(w) +
                            (at + TileAhead<MR>(kAhead, kFarAhead) * P) * static_cast<int64_t>(DTypeSize(T));
        Prefetch(ahead);
        if constexpr (T == DType::kF32) Prefetch(ahead + 64);
        LoadStep<T>(w, at, &lo[p], &hi[p]);
      }
      for (int m = 0; m < MR; ++m) {
        const V16 xb = Set(xr[m * ldx + k]);
        for (int p = 0; p < NP; ++p) {
          acc[m][p][0] = Fma(xb, lo[p], acc[m][p][0]);
          acc[m][p][1] = Fma(xb, hi[p], acc[m][p][1]);
        }
      }
    }
    StoreTile<MR, NP>(acc, y, ldy, valid, accumulate);
  }
};

template <DType T>
void Run(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin, int64_t n_end, float* y,
         int64_t ldy, bool accumulate) {
  const Kernel<T> k{x, ldx, w.data, w.cols, accumulate};
  PanelRange(k, M, n_begin, n_end, w.cols * P * 4, y, ldy);
}

}  // namespace

void PackedGemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin, int64_t n_end,
                     float* y, int64_t ldy, bool accumulate) {
  switch (w.dtype) {
    case DType::kF32: return Run<DType::kF32>(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
    case DType::kBF16: return Run<DType::kBF16>(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
    case DType::kF16: return Run<DType::kF16>(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
    default: return;  // quantized weights: QuantizedGemmRange
  }
}

LS_SIMD_END
