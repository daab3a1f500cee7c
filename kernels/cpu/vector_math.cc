// Vector helpers: dispatch and the portable versions.
#include "kernels/cpu/vector_math.h"

#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/gemm.h"

namespace ls::cpu {
namespace {
const bool kAvx512 = internal::CpuHasAvx512();
}

void GluRow(GluAct act, const float* g, const float* u, float* o, int64_t n) {
  if (kAvx512) return internal::GluRowAvx512(act, g, u, o, n);
  if (!act.plain()) {
    for (int64_t i = 0; i < n; ++i) o[i] = SiTU(g[i], u[i], act.beta, act.linear_beta);
    return;
  }
  if (act.kind == Activation::kSiTU) {
    for (int64_t i = 0; i < n; ++i) o[i] = SiTU(g[i]) * u[i];
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = SiLU(g[i]) * u[i];
  }
}

void SigmoidRow(const float* x, float* o, int64_t n) {
  if (kAvx512) return internal::SigmoidRowAvx512(x, o, n);
  for (int64_t i = 0; i < n; ++i) o[i] = Sigmoid(x[i]);
}

float Dot(const float* a, const float* b, int64_t n) {
  if (kAvx512) return internal::DotAvx512(a, b, n);
  float part[16] = {};
  for (int64_t i = 0; i < n; ++i) part[i % 16] += a[i] * b[i];
  float s = 0.f;
  for (float p : part) s += p;
  return s;
}

void Axpy(float a, const float* x, float* y, int64_t n) {
  if (kAvx512) return internal::AxpyAvx512(a, x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void RmsNormRow(const float* x, const float* w, int64_t n, float eps, float* o) {
  if (kAvx512) return internal::RmsNormRowAvx512(x, w, n, eps, o);
  internal::RmsNormRowPortable(x, w, n, eps, o);
}

void internal::RmsNormRowPortable(const float* x, const float* w, int64_t n, float eps, float* o) {
  float part[16] = {};
  for (int64_t i = 0; i < n; ++i) part[i % 16] += x[i] * x[i];
  float ss = 0.f;
  for (float p : part) ss += p;
  const float inv = 1.f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) o[i] = x[i] * inv * w[i];
}

}  // namespace ls::cpu
