// GEMM with BF16 activations for BF16 weights (the CPU backend's --activation_dtype bfloat16): each
// activation row is rounded to BF16 (round to nearest even) and meets the stored BF16 weights in
// AVX512-BF16 dot products (vdpbf16ps: two k per lane and instruction, no widening of the weights),
// twice the multiply rate of the float32 path at the cost of rounding the activations. Other SIMD
// targets follow the instruction's rule with fused multiply-adds (bf16_dot_gemm_simd.cc): the same
// arithmetic at the float32 path's rate.
// Layout (Layout::kPanelsBf16Dot): panels of kPanelRows rows, k in pairs (padded to an even count
// with zeros); per panel and pair, rows 0-15 then 16-31, each row's two values together (two
// 64-byte runs).
// Arithmetic (batch invariant; every target the instruction's rule): from zero, per pair q,
// acc = (acc + x[2q+1]·w[2q+1]) + x[2q]·w[2q], each product exact, each sum rounded to nearest even;
// subnormal inputs count as zero (they are flushed to signed zeros when rows are rounded and
// weights packed) and subnormal sums are flushed to zero. Where a product itself falls below 2^-126
// (|x·w| < 1.2e-38) vdpbf16ps and the fused multiply-adds of the other targets may differ in its
// last bits; nothing else differs. The finished sum is then stored or added to the old value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/tensor.h"

namespace ls::cpu {

size_t Bf16DotPackedBytes(const Tensor& w);
// Writes the packed copy of row-major BF16 `w` into dst (Bf16DotPackedBytes of it), subnormal
// values flushed to zeros of their sign, and returns its view.
Tensor PackBf16DotWeight(const Tensor& w, void* dst);

// Activation rows rounded to BF16: [rows, kp] (kp = K rounded up to even, the padding zero).
// Where the active kernels multiply widened weights (AVX2, from kWidenRows rows), they read the
// rows as float32 with the two values of every pair swapped ([rows, kp], `swapped`); AddSwappedRows
// makes them once for all of a GEMM's column ranges (without them each range makes its own).
struct Bf16Rows {
  int64_t rows = 0, kp = 0;
  const uint16_t* v = nullptr;
  const float* swapped = nullptr;
  Bf16Rows Slice(int64_t r0, int64_t n) const {
    return Bf16Rows{n, kp, v + r0 * kp, swapped ? swapped + r0 * kp : nullptr};
  }
};
// Rows rounded to nearest even, subnormal results flushed to zeros of their sign.
Bf16Rows RoundRowsToBf16(const float* x, int64_t ldx, int64_t M, int64_t K, std::vector<uint16_t>* storage);
// Sets x->swapped (kept in storage) where the active kernels read it for x's rows.
void AddSwappedRows(Bf16Rows* x, std::vector<float>* storage);
// dst[2q] = src[2q + 1], dst[2q + 1] = src[2q] as float32, for n (even) BF16 values.
void SwapPairsToF32(const uint16_t* src, int64_t n, float* dst);

// The GemmRange contract (kernels/cpu/gemm.h) for a weight packed by PackBf16DotWeight, over rows
// already rounded (x: rows [0, M) of y).
void Bf16DotGemmRange(const Bf16Rows& x, const Tensor& w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                      bool accumulate);

}  // namespace ls::cpu
