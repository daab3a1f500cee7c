// Vector helpers for the CPU ops' inner loops — GLU gates over a row, dot products and scaled
// adds — with an AVX-512 path (a polynomial exp accurate to a few ulp) and a portable one.
// Every function gives the same result for the same inputs wherever it is called from, which
// keeps rows batch invariant.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace ls::cpu {

// o[i] = act(g[i]) · u[i] for i < n.
void GluRow(Activation act, const float* g, const float* u, float* o, int64_t n);
// Σ a[i] · b[i].
float Dot(const float* a, const float* b, int64_t n);
// y[i] += a · x[i].
void Axpy(float a, const float* x, float* y, int64_t n);

namespace internal {
void GluRowAvx512(Activation act, const float* g, const float* u, float* o, int64_t n);
float DotAvx512(const float* a, const float* b, int64_t n);
void AxpyAvx512(float a, const float* x, float* y, int64_t n);
}  // namespace internal

}  // namespace ls::cpu
