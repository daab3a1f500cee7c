// GEMM with BF16 activations for BF16 weights (the CPU backend's --activation_dtype bfloat16): each
// activation row is rounded to BF16 (round to nearest even) and meets the stored BF16 weights in
// AVX512-BF16 dot products (vdpbf16ps: two k per lane and instruction, no widening of the weights),
// twice the multiply rate of the float32 path at the cost of rounding the activations.
// Layout (Layout::kPanelsBf16Dot): panels of kPanelRows rows, k in pairs (padded to an even count
// with zeros); per panel and pair, rows 0-15 then 16-31, each row's two values together (two
// 64-byte runs).
// Arithmetic (batch invariant; the portable kernel is the instruction's rule, bit for bit): from
// zero, per pair q, acc = (acc + x[2q+1]·w[2q+1]) + x[2q]·w[2q], each product exact in float32,
// each sum rounded to nearest even; subnormal inputs and sums count as zero. The finished sum is
// then stored or added to the old value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/tensor.h"

namespace ls::cpu {

size_t Bf16DotPackedBytes(const Tensor& w);
// Writes the packed copy of row-major BF16 `w` into dst (Bf16DotPackedBytes of it), returns its view.
Tensor PackBf16DotWeight(const Tensor& w, void* dst);

// Activation rows rounded to BF16: [rows, kp] (kp = K rounded up to even, the padding zero).
struct Bf16Rows {
  int64_t rows = 0, kp = 0;
  const uint16_t* v = nullptr;
  Bf16Rows Slice(int64_t r0, int64_t n) const { return Bf16Rows{n, kp, v + r0 * kp}; }
};
Bf16Rows RoundRowsToBf16(const float* x, int64_t ldx, int64_t M, int64_t K, std::vector<uint16_t>* storage);

// The GemmRange contract (kernels/cpu/gemm.h) for a weight packed by PackBf16DotWeight, over rows
// already rounded (x: rows [0, M) of y).
void Bf16DotGemmRange(const Bf16Rows& x, const Tensor& w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                      bool accumulate);

// Whether this CPU runs the AVX512-BF16 kernel (else the portable one, far slower).
bool Bf16DotUsesAvx512();

namespace internal {
void Bf16DotRangeScalar(const Bf16Rows& x, const Tensor& w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                        bool accumulate);
// False when the CPU lacks AVX512-BF16.
bool Bf16DotRangeAvx512(const Bf16Rows& x, const Tensor& w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                        bool accumulate);
bool CpuHasAvx512Bf16();
}  // namespace internal

}  // namespace ls::cpu
