// Vector helpers for the CPU ops' inner loops — GLU gates and sigmoids over a row, dot products,
// scaled adds and RMSNorm rows — with an AVX-512 path (a polynomial exp accurate to a few ulp) and a portable one.
// Every function gives the same result for the same inputs wherever it is called from, which
// keeps rows batch invariant.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace ls::cpu {

// o[i] = 1 / (1 + e^−x[i]) for i < n (the router's sigmoid scores).
void SigmoidRow(const float* x, float* o, int64_t n);
// o[i] = act(g[i]) · u[i] for i < n.
void GluRow(GluAct act, const float* g, const float* u, float* o, int64_t n);
// Σ a[i] · b[i].
float Dot(const float* a, const float* b, int64_t n);
// y[i] += a · x[i].
void Axpy(float a, const float* x, float* y, int64_t n);
// o[i] = x[i] · (1 / √(Σ x² / n + eps)) · w[i]; the squares are summed in 16 lanes (lane i % 16),
// then the lanes in order. o may be x.
void RmsNormRow(const float* x, const float* w, int64_t n, float eps, float* o);

namespace internal {
void SigmoidRowAvx512(const float* x, float* o, int64_t n);
void GluRowAvx512(GluAct act, const float* g, const float* u, float* o, int64_t n);
float DotAvx512(const float* a, const float* b, int64_t n);
void AxpyAvx512(float a, const float* x, float* y, int64_t n);
void RmsNormRowAvx512(const float* x, const float* w, int64_t n, float eps, float* o);
void RmsNormRowPortable(const float* x, const float* w, int64_t n, float eps, float* o);
}  // namespace internal

}  // namespace ls::cpu
