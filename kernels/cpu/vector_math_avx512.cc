// AVX-512 vector helpers: the GLU gates and sigmoids (on the polynomial exp of exp_avx512.h),
// dot products, scaled adds and RMSNorm rows. Compiled with AVX-512 flags; only called when the
// CPU has AVX-512F/BW.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/exp_avx512.h"
#include "kernels/cpu/vector_math.h"

namespace ls::cpu::internal {
namespace {

// SiTU(x) = sigmoid(x)·tanh(x) = (1 − t²) / ((1 + t)(1 + t²)) with t = e^−x (x clamped to ±40,
// where SiTU is 0 or 1 to float precision).
inline __m512 SiTU(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(40.f)), _mm512_set1_ps(-40.f));
  const __m512 one = _mm512_set1_ps(1.f);
  const __m512 t = Exp(_mm512_sub_ps(_mm512_setzero_ps(), x));
  const __m512 t2 = _mm512_mul_ps(t, t);
  return _mm512_div_ps(_mm512_sub_ps(one, t2), _mm512_mul_ps(_mm512_add_ps(one, t), _mm512_add_ps(one, t2)));
}

// tanh(x) = (1 − e^−2x) / (1 + e^−2x), x clamped to ±20 (where tanh is ±1 to float precision).
inline __m512 Tanh(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(20.f)), _mm512_set1_ps(-20.f));
  const __m512 one = _mm512_set1_ps(1.f);
  const __m512 t = Exp(_mm512_mul_ps(x, _mm512_set1_ps(-2.f)));
  return _mm512_div_ps(_mm512_sub_ps(one, t), _mm512_add_ps(one, t));
}

// SiLU(x) = x / (1 + e^−x).
inline __m512 SiLU(__m512 x) {
  const __m512 t = Exp(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.f), t));
}

// The general SiTU over a row: β·tanh(g/β)·σ(g) · γ·tanh(u/γ) (γ = 0: u as it is).
void GeneralSiTURow(float beta, float linear_beta, const float* g, const float* u, float* o, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.f), b = _mm512_set1_ps(beta), inv_b = _mm512_set1_ps(1.f / beta);
  const __m512 lb = _mm512_set1_ps(linear_beta), inv_lb = _mm512_set1_ps(linear_beta > 0.f ? 1.f / linear_beta : 0.f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 gv = _mm512_maskz_loadu_ps(m, g + i);
    __m512 uv = _mm512_maskz_loadu_ps(m, u + i);
    const __m512 x = _mm512_max_ps(_mm512_min_ps(gv, _mm512_set1_ps(40.f)), _mm512_set1_ps(-40.f));
    const __m512 sig = _mm512_div_ps(one, _mm512_add_ps(one, Exp(_mm512_sub_ps(_mm512_setzero_ps(), x))));
    const __m512 gate = _mm512_mul_ps(_mm512_mul_ps(b, Tanh(_mm512_mul_ps(gv, inv_b))), sig);
    if (linear_beta > 0.f) uv = _mm512_mul_ps(lb, Tanh(_mm512_mul_ps(uv, inv_lb)));
    _mm512_mask_storeu_ps(o + i, m, _mm512_mul_ps(gate, uv));
  }
}

}  // namespace

void GluRowAvx512(GluAct act, const float* g, const float* u, float* o, int64_t n) {
  if (!act.plain()) return GeneralSiTURow(act.beta, act.linear_beta, g, u, o, n);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 gv = _mm512_maskz_loadu_ps(m, g + i), uv = _mm512_maskz_loadu_ps(m, u + i);
    const __m512 a = act.kind == Activation::kSiTU ? SiTU(gv) : SiLU(gv);
    _mm512_mask_storeu_ps(o + i, m, _mm512_mul_ps(a, uv));
  }
}

void SigmoidRowAvx512(const float* x, float* o, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 t = Exp(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(m, x + i)));
    _mm512_mask_storeu_ps(o + i, m, _mm512_div_ps(one, _mm512_add_ps(one, t)));
  }
}

float DotAvx512(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1u);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

void AxpyAvx512(float a, const float* x, float* y, int64_t n) {
  const __m512 av = _mm512_set1_ps(a);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

void RmsNormRowAvx512(const float* x, const float* w, int64_t n, float eps, float* o) {
  __m512 acc = _mm512_setzero_ps();  // lane j sums x[i]² over i ≡ j (mod 16), as the portable loop
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    acc = _mm512_add_ps(acc, _mm512_mul_ps(v, v));
  }
  alignas(64) float part[16];
  _mm512_store_ps(part, acc);
  float ss = 0.f;
  for (float p : part) ss += p;
  const __m512 inv = _mm512_set1_ps(1.f / std::sqrt(ss / static_cast<float>(n) + eps));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv);
    _mm512_mask_storeu_ps(o + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i)));
  }
}

}  // namespace ls::cpu::internal
