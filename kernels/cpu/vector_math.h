// Vector helpers for the CPU ops' inner loops — GLU gates and sigmoids over a row, dot products,
// scaled adds, RMSNorm rows and rows of exponentials — compiled for every SIMD target
// (vector_math_simd.cc) and called through the active kernel table. Each gives the same bits on
// every target and wherever it is called from, which keeps rows batch invariant: lane-wise
// arithmetic on 16 lanes (element i in lane i % 16) and the vector layer's e^x and summation tree
// (kernels/cpu/simd/vec.h).
#pragma once

#include <cstdint>

#include "kernels/cpu/simd/kernel_table.h"
#include "kernels/ops.h"

namespace ls::cpu {

// o[i] = 1 / (1 + e^−x[i]) for i < n (the router's sigmoid scores).
inline void SigmoidRow(const float* x, float* o, int64_t n) { ActiveKernels().SigmoidRow(x, o, n); }
// o[i] = x[i] / (1 + e^−x[i]) for i < n. o may be x.
inline void SiluRow(const float* x, float* o, int64_t n) { ActiveKernels().SiluRow(x, o, n); }
// o[i] = act(g[i]) · u[i] for i < n.
inline void GluRow(GluAct act, const float* g, const float* u, float* o, int64_t n) {
  ActiveKernels().GluRow(act, g, u, o, n);
}
// Σ a[i] · b[i]: fused multiply-adds in 16 lanes, then the tree.
inline float Dot(const float* a, const float* b, int64_t n) { return ActiveKernels().Dot(a, b, n); }
// y[i] += a · x[i] (fused).
inline void Axpy(float a, const float* x, float* y, int64_t n) { ActiveKernels().Axpy(a, x, y, n); }
// o[i] = x[i] · (1 / √(Σ x² / n + eps)) · w[i]; the squares are summed in 16 lanes (lane i % 16),
// then the lanes in order. o may be x.
inline void RmsNormRow(const float* x, const float* w, int64_t n, float eps, float* o) {
  ActiveKernels().RmsNormRow(x, w, n, eps, o);
}
// o[i] = e^(x[i] − shift) for i < n; returns their sum (lane i % 16, then the tree). o may be x.
inline float ExpRow(const float* x, float shift, float* o, int64_t n) {
  return ActiveKernels().ExpRow(x, shift, o, n);
}

}  // namespace ls::cpu
