// The row-major GEMM kernel (gemm.h) for every SIMD target: tiles of MB activation rows × NB
// weight rows, one 16-lane accumulator per output element (element k of the dot product adds into
// lane k % 16, in k order), weights widened to float32 as they stream in, and the lanes summed by
// the vector layer's tree. Row-major weights are the unpacked case (tests, small tools); the
// server's weights are packed.
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/simd/vec.h"

LS_SIMD_BEGIN
namespace {

template <DType T>
inline V16 LoadW(const void* base, int64_t i, int n) {
  if constexpr (T == DType::kF32) {
    return LoadN(static_cast<const float*>(base) + i, n);
  } else if constexpr (T == DType::kBF16) {
    return LoadBf16N(static_cast<const uint16_t*>(base) + i, n);
  } else {
    const auto* h = static_cast<const uint16_t*>(base) + i;
    if (n >= 16) return LoadF16(h);
    uint16_t tmp[16] = {};
    for (int j = 0; j < n; ++j) tmp[j] = h[j];
    return LoadF16(tmp);
  }
}

template <DType T, int MB, int NB>
inline void Tile(const float* x, int64_t ldx, const void* w, int64_t K, int64_t n0, float* y, int64_t ldy,
                 bool accumulate) {
  V16 acc[MB][NB];
  for (int m = 0; m < MB; ++m)
    for (int n = 0; n < NB; ++n) acc[m][n] = Zero();
  for (int64_t k = 0; k < K; k += 16) {
    const int left = K - k >= 16 ? 16 : static_cast<int>(K - k);
    V16 wv[NB];
    for (int n = 0; n < NB; ++n) wv[n] = LoadW<T>(w, (n0 + n) * K + k, left);
    for (int m = 0; m < MB; ++m) {
      const V16 xv = LoadN(x + m * ldx + k, left);
      for (int n = 0; n < NB; ++n) acc[m][n] = Fma(xv, wv[n], acc[m][n]);
    }
  }
  for (int m = 0; m < MB; ++m)
    for (int n = 0; n < NB; ++n) {
      const float s = ReduceAdd(acc[m][n]);
      float& out = y[m * ldy + n0 + n];
      out = accumulate ? out + s : s;
    }
}

constexpr int kTileWeights = kTileRegs >= 32 ? 8 : 4;

template <DType T, int MB>
void Rows(const float* x, int64_t ldx, const void* w, int64_t K, int64_t count, float* y, int64_t ldy,
          bool accumulate) {
  constexpr int NB = MB == 1 ? kTileWeights : kTileWeights / 2;
  int64_t n = 0;
  for (; n + NB <= count; n += NB) Tile<T, MB, NB>(x, ldx, w, K, n, y, ldy, accumulate);
  for (; n < count; ++n) Tile<T, MB, 1>(x, ldx, w, K, n, y, ldy, accumulate);
}

template <DType T>
void Range(const float* x, int64_t ldx, int64_t M, const void* w, int64_t K, int64_t count, float* y, int64_t ldy,
           bool accumulate) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) Rows<T, 4>(x + m * ldx, ldx, w, K, count, y + m * ldy, ldy, accumulate);
  switch (M - m) {
    case 3: Rows<T, 3>(x + m * ldx, ldx, w, K, count, y + m * ldy, ldy, accumulate); break;
    case 2: Rows<T, 2>(x + m * ldx, ldx, w, K, count, y + m * ldy, ldy, accumulate); break;
    case 1: Rows<T, 1>(x + m * ldx, ldx, w, K, count, y + m * ldy, ldy, accumulate); break;
    default: break;
  }
}

}  // namespace

void RowMajorGemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin, int64_t n_end,
                       float* y, int64_t ldy, bool accumulate) {
  // The weight rows [n_begin, n_end) as rows [0, count) of a sub-view.
  const Tensor sub = w.RowSlice(n_begin, n_end - n_begin);
  const int64_t count = n_end - n_begin;
  switch (w.dtype) {
    case DType::kF32: return Range<DType::kF32>(x, ldx, M, sub.data, w.cols, count, y, ldy, accumulate);
    case DType::kBF16: return Range<DType::kBF16>(x, ldx, M, sub.data, w.cols, count, y, ldy, accumulate);
    case DType::kF16: return Range<DType::kF16>(x, ldx, M, sub.data, w.cols, count, y, ldy, accumulate);
    default: return;  // quantized weights: quantized_gemm.h
  }
}

LS_SIMD_END
