// GEMM with int8 activations for weights quantized with QuantScales::int8_activations (the online
// w8a8 and w4a8 schemes, and int8 and int4 weights under --activation_dtype int8): each activation
// row is rounded to int8 with one scale per row (s = amax / 127, q = round-to-nearest-even(x · 127
// / amax)) and multiplied with the integer weight codes in int32 by dot products of four codes per
// lane (vpdpbusd with AVX512-VNNI or AVX-VNNI, vpmaddubsw elsewhere on x86, sdot on Arm, AMX tiles
// for I8 codes and 16 rows or more; int8_dot_gemm_simd.cc), so a weight is read as its stored byte
// or nibble and never widened to float32.
// Layout (Layout::kPanelsInt8Dot): panels of kPanelRows rows, k in quads, padded to a multiple of
// four; per panel and quad, I8 codes: rows 0-15 then 16-31, each row's four codes together (two
// 64-byte runs); U4 codes: one 64-byte run, byte 4j + i holding row j's code k + i in its low
// nibble and row 16 + j's in its high one. Beside them, the per-panel scales as in
// quantized_gemm.h (F16 scales widened to float32), for I8 each row's code sum (int32, for the
// unsigned-activation offset), and for U4 with zero points the zero points on the scales' grid.
// Arithmetic (batch invariant; every SIMD target gives the same bits):
//   I8 (one scale per row):   y[m, n] = float(Σ_k (q[m,k] + 128) · w[n,k] − 128 · Σ_k w[n,k]) · s_x[m] · s_w[n]
//   U4 (groups along k):      y[m, n] = (Σ_g float(Σ_{k∈g} u[n,k] · q[m,k] − z[n,g] Σ_{k∈g} q[m,k]) fused-multiply-
//   added with s_w[n, g] in group order from zero) · s_x[m], z the zero point (8 without zero points)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/tensor.h"

namespace ls {
class ThreadPool;
}  // namespace ls

namespace ls::cpu {

// Whether `w` (row-major, quantized) is packed for the int8-activation kernels.
bool UsesInt8Dot(const Tensor& w);
// Whether the kernels read `w`'s codes and scales, whatever its activations: I8 codes with one
// float32 scale per row (the online int8 scheme), or U4 codes in groups of a multiple of four along
// k with float32, BF16 or F16 scales, with or without zero points (the online int4 scheme, stored
// int4 checkpoints).
bool Int8DotReadsCodes(const Tensor& w);
size_t Int8DotPackedBytes(const Tensor& w);
// With a pool, panels are packed side by side.
Tensor PackInt8DotWeight(const Tensor& w, void* dst, ThreadPool* pool = nullptr);

// Activation rows rounded to int8: q [M, Kp] (Kp = K rounded up to 4, the padding zero), as
// unsigned q + 128 too, their scales [M] and per-group sums [M, groups].
struct Int8Rows {
  int64_t rows = 0, kp = 0, groups = 0, group = 0;
  const int8_t* q = nullptr;
  const uint8_t* u = nullptr;
  const float* scale = nullptr;
  const int32_t* sums = nullptr;
  // Rows [r0, r0 + n).
  Int8Rows Slice(int64_t r0, int64_t n) const {
    return Int8Rows{n, kp, groups, group, q + r0 * kp, u + r0 * kp, scale + r0, sums + r0 * groups};
  }
};
struct Int8RowsStorage {
  std::vector<int8_t> q;
  std::vector<uint8_t> u;
  std::vector<float> scale;
  std::vector<int32_t> sums;
};
// Rounds x [M, K] for `w`'s kernels (its k groups decide the sums) into `storage`.
Int8Rows QuantizeRows(const float* x, int64_t ldx, int64_t M, const Tensor& w, Int8RowsStorage* storage);

// The GemmRange contract (kernels/cpu/gemm.h) for a weight packed by PackInt8DotWeight, over rows
// already rounded (x: rows [0, M) of y).
void Int8DotGemmRange(const Int8Rows& x, const Tensor& w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                      bool accumulate);
// The same from float rows (rounded on each call: for callers that run one range).
void Int8DotGemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin, int64_t n_end, float* y,
                      int64_t ldy, bool accumulate);

namespace internal {
// The group size the rows of x need for `w`: 0 when no sums are needed (I8 codes).
inline int64_t RowGroup(const Tensor& w) { return w.dtype == DType::kU4 ? w.quant.block_cols : 0; }
// Rounds x [M, K] with k groups of `group` (0: no sums), the same bits on every SIMD target.
Int8Rows QuantizeRows(const float* x, int64_t ldx, int64_t M, int64_t K, int64_t group, Int8RowsStorage* storage);
}  // namespace internal

}  // namespace ls::cpu
