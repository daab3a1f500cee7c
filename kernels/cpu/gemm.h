// GEMM for the CPU backend: y = x · Wᵀ with float32 activations and F32/BF16/F16 weights read
// as stored (no up-front conversion), accumulated in float32. GemmRange sends each weight layout
// to its kernel (packed_gemm.h, quantized_gemm.h, int8_dot_gemm.h, bf16_dot_gemm.h; row-major
// weights: a 16-lane dot product per output, element k in lane k % 16, lanes summed by the vector
// layer's tree), each compiled for every SIMD target and chosen through the kernel table.
// Every output element is one dot product with a fixed summation order, whatever the batch
// shape, thread count or CPU, so a row's result does not depend on the other rows (batch
// invariance) or on the machine.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/bf16_dot_gemm.h"
#include "kernels/cpu/int8_dot_gemm.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"
#include "kernels/thread_pool.h"

namespace ls::cpu {

// Single-threaded core: for m < M and n in [n_begin, n_end),
// y[m*ldy + (n - n_begin)] (+)= Σ_k x[m*ldx + k] · w[n, k], with k < w.cols.
// (y points at the first output column of the range; packed weights: n_begin on a panel boundary.)
void GemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin,
               int64_t n_end, float* y, int64_t ldy, bool accumulate);

// Activation rows in the form a weight's GEMM reads them: rounded once, for every task over them,
// to int8 (weights in Layout::kPanelsInt8Dot) or BF16 (kPanelsBf16Dot); else the float rows.
struct GemmRows {
  Layout layout = Layout::kRowMajor;  // what they were prepared for (int8, BF16, or anything else: float)
  const float* x = nullptr;
  int64_t ldx = 0, rows = 0;
  Int8Rows i8;
  int64_t i8_group = 0;  // the k grouping of the int8 rows' sums
  Bf16Rows bf16;
  GemmRows Slice(int64_t r0, int64_t n) const {
    GemmRows r = *this;
    r.x = x + r0 * ldx;
    r.rows = n;
    if (layout == Layout::kPanelsInt8Dot) r.i8 = i8.Slice(r0, n);
    if (layout == Layout::kPanelsBf16Dot) r.bf16 = bf16.Slice(r0, n);
    return r;
  }
};
struct GemmRowsStorage {
  Int8RowsStorage i8;
  std::vector<uint16_t> bf16;
  std::vector<float> bf16_swapped;
};
// x [M, w.cols] prepared for w's GEMM (and for any weight of the same layout and k grouping).
GemmRows PrepareRows(const float* x, int64_t ldx, int64_t M, const Tensor& w, GemmRowsStorage* storage);
// GemmRange over prepared rows; rows prepared for another kind of weight are re-rounded for w.
void GemmRange(const GemmRows& x, const Tensor& w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
               bool accumulate);

// The output columns per task of Gemm, GemmMany and HeadGemm over M rows: enough tasks to balance,
// each large enough to amortise dispatch; whole panels for packed weights, and below four rows at
// least four of them (the widest tiles of few rows read that many panels side by side).
int64_t GemmColumnChunk(const ThreadPool& pool, int64_t M, const Tensor& w);

// y[M, N] (+)= x[M, K] · w[N, K]ᵀ, split over the pool by output columns.
void Gemm(ThreadPool& pool, const float* x, int64_t M, const Tensor& w, float* y,
          bool accumulate = false);

// Gemm for each of outs over the same x, all in one parallel loop (fewer, better balanced loops
// than one call each); each output is computed exactly as Gemm computes it.
void GemmMany(ThreadPool& pool, const float* x, int64_t M, const GemmOutput* outs, int32_t n);

// One GEMM per head (Backend::HeadGemm): y[t, h, :] = x[t, h, :] · w[h]ᵀ with the given row
// strides; all heads' weights have the same shape.
void HeadGemm(ThreadPool& pool, const float* x, RowStrides xs, int64_t M, int32_t heads, const Tensor* w, float* y,
              RowStrides ys);

}  // namespace ls::cpu
