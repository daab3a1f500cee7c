// Packing of quantized weights into panels, their GEMM's dispatch (the kernel:
// quantized_gemm_simd.cc), and the element-by-element GEMM of row-major quantized weights.
#include "kernels/cpu/quantized_gemm.h"

#include <cassert>
#include <cstring>

#include "kernels/cpu/fused_multiply_add.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/simd/kernel_table.h"
#include "kernels/quantized_weight.h"

namespace ls::cpu {
namespace {

constexpr int64_t P = kPanelRows;

// The scale type a packed copy keeps.
DType PackedScaleType(const Tensor& w) {
  const DType s = w.quant.scale_dtype;
  if (w.dtype == DType::kE2M1 && s == DType::kE8M0) return s;
  if (w.dtype == DType::kU4 && s == DType::kBF16) return s;
  return DType::kF32;
}

// The packed view of `w` at dst, before its contents are written.
Tensor PackedView(const Tensor& w, void* dst) {
  Tensor out = w;
  out.layout = Layout::kPanels;
  out.data = dst;
  out.quant.block_rows = 1;
  out.quant.scale_dtype = PackedScaleType(w);
  auto* base = static_cast<unsigned char*>(dst);
  out.quant.scale = base + Align64(out.bytes());
  out.quant.zero = w.quant.zero ? base + Align64(out.bytes()) + Align64(out.scale_bytes()) : nullptr;
  return out;
}

bool FourBit(DType t) { return DTypeBits(t) == 4; }

}  // namespace

size_t QuantizedPackedBytes(const Tensor& w) {
  Tensor v = PackedView(w, nullptr);
  v.quant.scale = w.quant.scale;  // any non-null: only the sizes are read
  return Align64(v.bytes()) + Align64(v.scale_bytes()) + v.zero_bytes();
}

Tensor PackQuantizedWeight(const Tensor& w, void* dst) {
  assert(w.layout == Layout::kRowMajor && w.quantized());
  Tensor out = PackedView(w, dst);
  const int64_t K = w.cols, panels = out.stored_rows() / P, G = out.scale_cols();
  auto* codes = static_cast<uint8_t*>(dst);
  std::memset(codes, 0, QuantizedPackedBytes(w));
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t p = 0; p < panels; ++p) {
    for (int64_t j = 0; j < P && p * P + j < w.rows; ++j) {
      const int64_t row = p * P + j;
      for (int64_t k = 0; k < K; ++k) {
        if (FourBit(w.dtype)) {
          const uint8_t c = LoadNibble(w.data, row * K + k);
          codes[(p * K + k) * (P / 2) + j % (P / 2)] |= j < P / 2 ? c : c << 4;
        } else {
          codes[(p * K + k) * P + j] = src[row * K + k];
        }
      }
      // Scales and zero points of this row, one per k group.
      for (int64_t g = 0; g < G; ++g) {
        const int64_t at = (p * G + g) * P + j, br = row / w.quant.block_rows;
        auto* scales = static_cast<uint8_t*>(const_cast<void*>(out.quant.scale));
        if (out.quant.scale_dtype == DType::kF32) {
          const float s = BlockScale(w, br, g);
          std::memcpy(scales + 4 * at, &s, 4);
        } else {  // kept as stored: BF16 or E8M0
          const size_t es = DTypeSize(out.quant.scale_dtype);
          std::memcpy(scales + es * at, static_cast<const uint8_t*>(w.quant.scale) + es * (br * G + g), es);
        }
        if (out.quant.zero)
          static_cast<uint8_t*>(const_cast<void*>(out.quant.zero))[at] = static_cast<uint8_t>(ZeroPoint(w, br, g));
      }
    }
  }
  return out;
}

namespace internal {

void RowMajorQuantizedGemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin, int64_t n_end,
                                float* y, int64_t ldy, bool accumulate) {
  for (int64_t n = n_begin; n < n_end; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      const float* xr = x + m * ldx;
      float s = 0.f;
      for (int64_t k = 0; k < w.cols; ++k) s = FusedMulAdd(xr[k], WeightValue(w, n, k), s);
      float& out = y[m * ldy + (n - n_begin)];
      out = accumulate ? out + s : s;
    }
  }
}

}  // namespace internal

void QuantizedGemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin, int64_t n_end,
                        float* y, int64_t ldy, bool accumulate) {
  ActiveKernels().QuantizedGemmRange(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
}

}  // namespace ls::cpu
