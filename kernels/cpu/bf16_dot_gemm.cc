// BF16-activation GEMM: packing, activation rounding and dispatch (the kernel:
// bf16_dot_gemm_simd.cc).
#include "kernels/cpu/bf16_dot_gemm.h"

#include <cassert>
#include <cstring>

#include "kernels/cpu/simd/kernel_table.h"
#include "kernels/dtype.h"

namespace ls::cpu {
namespace {

constexpr int64_t P = kPanelRows;

Tensor PackedView(const Tensor& w, void* dst) {
  Tensor out = w;
  out.layout = Layout::kPanelsBf16Dot;
  out.data = dst;
  return out;
}

// Index of row j's value k within a packed weight of kp columns.
int64_t ValueIndex(int64_t panel, int64_t kp, int64_t j, int64_t k) {
  return (panel * (kp / 2) + k / 2) * (2 * P) + (j / 16) * 32 + (j % 16) * 2 + k % 2;
}

// The instruction reads subnormal inputs as zero: a BF16 value with a zero exponent and a nonzero
// mantissa becomes the zero of its sign.
inline uint16_t FlushedBf16(uint16_t h) { return (h & 0x7f80u) == 0 ? h & 0x8000u : h; }

}  // namespace

size_t Bf16DotPackedBytes(const Tensor& w) { return PackedView(w, nullptr).bytes(); }

Tensor PackBf16DotWeight(const Tensor& w, void* dst) {
  assert(w.dtype == DType::kBF16 && !w.quantized() && w.layout == Layout::kRowMajor);
  Tensor out = PackedView(w, dst);
  std::memset(dst, 0, out.bytes());
  const int64_t K = w.cols, kp = out.stored_cols();
  const auto* src = static_cast<const uint16_t*>(w.data);
  auto* d = static_cast<uint16_t*>(dst);
  for (int64_t row = 0; row < w.rows; ++row)
    for (int64_t k = 0; k < K; ++k) d[ValueIndex(row / P, kp, row % P, k)] = FlushedBf16(src[row * K + k]);
  return out;
}

Bf16Rows RoundRowsToBf16(const float* x, int64_t ldx, int64_t M, int64_t K, std::vector<uint16_t>* storage) {
  Bf16Rows r{M, (K + 1) / 2 * 2, nullptr};
  storage->resize(static_cast<size_t>(M * r.kp));
  for (int64_t m = 0; m < M; ++m) {
    uint16_t* out = storage->data() + m * r.kp;
    for (int64_t k = 0; k < K; ++k) out[k] = FlushedBf16(F32ToBf16(x[m * ldx + k]));
    if (K < r.kp) out[K] = 0;
  }
  r.v = storage->data();
  return r;
}

void AddSwappedRows(Bf16Rows* x, std::vector<float>* storage) {
  if (!ActiveKernels().Bf16DotReadsSwappedRows(x->rows)) return;
  storage->resize(static_cast<size_t>(x->rows * x->kp));
  SwapPairsToF32(x->v, x->rows * x->kp, storage->data());
  x->swapped = storage->data();
}

void SwapPairsToF32(const uint16_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; i += 2) {
    dst[i] = Bf16ToF32(src[i + 1]);
    dst[i + 1] = Bf16ToF32(src[i]);
  }
}

void Bf16DotGemmRange(const Bf16Rows& x, const Tensor& w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                      bool accumulate) {
  ActiveKernels().Bf16DotRange(x, w, n_begin, n_end, y, ldy, accumulate);
}

}  // namespace ls::cpu
