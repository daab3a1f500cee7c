// Packed GEMM over quantized weights for the CPU backend: the codes stay as stored (8 or 4 bits a
// weight) in panels of kPanelRows rows, k-major like packed_gemm.h, and are widened to float32
// inside the tile. 8-bit codes: 32 bytes per k step in row order. 4-bit codes: 16 bytes per k step,
// byte j holding row j in its low nibble and row 16 + j in its high one. Beside the codes, per panel
// and k group, the 32 rows' scales (F32, BF16 or E8M0) and zero points (U8), Tensor::quant.
// Arithmetic (batch invariant, the same bits on every SIMD target): each weight is decoded
// exactly to (code − zero) in float32 and multiplied by its scale (one rounding, as a float32
// dequantization would), then enters the output's fused multiply-add chain over k = 0..K-1 from
// zero. I8 weights (one scale per row) instead run the chain over the integer codes and multiply
// the sum by the row's scale once at the end.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/tensor.h"

namespace ls::cpu {

// Bytes of the packed copy of row-major quantized `w` (codes, then scales, then zero points, each
// 64-byte aligned).
size_t QuantizedPackedBytes(const Tensor& w);
// Writes the packed copy of row-major quantized `w` into dst and returns its view. Scales are kept
// as E8M0 (E2M1 codes) or BF16 (U4 codes with BF16 scales), else widened to F32.
Tensor PackQuantizedWeight(const Tensor& w, void* dst);

// The GemmRange contract (kernels/cpu/gemm.h) for a packed quantized weight.
void QuantizedGemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin, int64_t n_end,
                        float* y, int64_t ldy, bool accumulate);

namespace internal {
// The GemmRange contract for a row-major quantized weight (reference only: element by element).
void RowMajorQuantizedGemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin, int64_t n_end,
                                float* y, int64_t ldy, bool accumulate);
}  // namespace internal

}  // namespace ls::cpu
