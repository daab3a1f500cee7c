// Packed-weight GEMM for the CPU backend: weights are repacked once, at load, into panels of
// kPanelRows output rows stored k-major (Layout::kPanels), so that one k step of a panel is one
// contiguous 32-value run. The kernel broadcasts one activation and multiplies it into a whole
// panel step with fused multiply-adds, so each weight is converted to float32 once per tile of
// up to twelve activation rows instead of once per row.
// Summation order: every output element is one float32 fused multiply-add chain over k = 0..K-1
// from zero, whatever the tile shape, batch size or thread count (batch invariance); with
// accumulate, the finished sum is then added to the old value. The kernel is compiled for every
// SIMD target (packed_gemm_simd.cc); all give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/tensor.h"

namespace ls {
class ThreadPool;
}  // namespace ls

namespace ls::cpu {

// Bytes of the packed copy of a row-major weight.
size_t PackedWeightBytes(const Tensor& w);
// Writes the packed copy of row-major `w` into dst (PackedWeightBytes of it) and returns its view.
// BF16 panels interleave their rows (position 2j holds row j, 2j+1 row 16+j) so that two shifts
// and masks widen a 32-value run into rows 0-15 and 16-31; F32 and F16 panels keep row order.
// Quantized weights keep their codes and scales (kernels/cpu/quantized_gemm.h; with int8
// activations kernels/cpu/int8_dot_gemm.h, Layout::kPanelsInt8Dot). With a pool, float and int8-
// activation panels are packed side by side.
Tensor PackWeight(const Tensor& w, void* dst, ThreadPool* pool = nullptr);

// The GemmRange contract (kernels/cpu/gemm.h) for a packed weight; n_begin is a panel boundary.
void PackedGemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin,
                     int64_t n_end, float* y, int64_t ldy, bool accumulate);

}  // namespace ls::cpu
