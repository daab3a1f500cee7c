// The vector helpers (vector_math.h) for every SIMD target: GLU gates and sigmoids on the vector
// layer's exp, dot products and scaled adds, RMSNorm rows, and rows of exponentials.
#include "kernels/cpu/vector_math.h"
#include "kernels/cpu/simd/vec.h"

LS_SIMD_BEGIN
namespace {

inline int Left(int64_t n, int64_t i) { return n - i >= 16 ? 16 : static_cast<int>(n - i); }

// The general SiTU over a row: β·tanh(g/β)·σ(g) · γ·tanh(u/γ) (γ = 0: u as it is).
void GeneralSiTURow(float beta, float linear_beta, const float* g, const float* u, float* o, int64_t n) {
  const V16 b = Set(beta), inv_b = Set(1.f / beta);
  const V16 lb = Set(linear_beta), inv_lb = Set(linear_beta > 0.f ? 1.f / linear_beta : 0.f);
  for (int64_t i = 0; i < n; i += 16) {
    const int m = Left(n, i);
    const V16 gv = LoadN(g + i, m);
    V16 uv = LoadN(u + i, m);
    const V16 x = Max(Min(gv, Set(40.f)), Set(-40.f));
    const V16 gate = Mul(Mul(b, Tanh(Mul(gv, inv_b))), Sigmoid(x));
    if (linear_beta > 0.f) uv = Mul(lb, Tanh(Mul(uv, inv_lb)));
    StoreN(o + i, Mul(gate, uv), m);
  }
}

}  // namespace

void GluRow(GluAct act, const float* g, const float* u, float* o, int64_t n) {
  if (!act.plain()) return GeneralSiTURow(act.beta, act.linear_beta, g, u, o, n);
  const bool situ = act.kind == Activation::kSiTU;
  for (int64_t i = 0; i < n; i += 16) {
    const int m = Left(n, i);
    const V16 gv = LoadN(g + i, m), uv = LoadN(u + i, m);
    StoreN(o + i, Mul(situ ? SiTU(gv) : SiLU(gv), uv), m);
  }
}

void SigmoidRow(const float* x, float* o, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const int m = Left(n, i);
    StoreN(o + i, Sigmoid(LoadN(x + i, m)), m);
  }
}

void SiluRow(const float* x, float* o, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const int m = Left(n, i);
    StoreN(o + i, SiLU(LoadN(x + i, m)), m);
  }
}

float Dot(const float* a, const float* b, int64_t n) {
  V16 acc = Zero();
  for (int64_t i = 0; i < n; i += 16) {
    const int m = Left(n, i);
    acc = Fma(LoadN(a + i, m), LoadN(b + i, m), acc);
  }
  return ReduceAdd(acc);
}

void Axpy(float a, const float* x, float* y, int64_t n) {
  const V16 av = Set(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) Store(y + i, Fma(av, Load(x + i), Load(y + i)));
  if (i < n) {
    const int m = Left(n, i);
    StoreN(y + i, Fma(av, LoadN(x + i, m), LoadN(y + i, m)), m);
  }
}

void RmsNormRow(const float* x, const float* w, int64_t n, float eps, float* o) {
  V16 acc = Zero();  // lane j sums x[i]² over i ≡ j (mod 16)
  for (int64_t i = 0; i < n; i += 16) {
    const V16 v = LoadN(x + i, Left(n, i));
    acc = Add(acc, Mul(v, v));
  }
  float part[16];
  Store(part, acc);
  float ss = 0.f;
  for (float p : part) ss += p;  // the lanes in order
  const V16 inv = Set(1.f / std::sqrt(ss / static_cast<float>(n) + eps));
  for (int64_t i = 0; i < n; i += 16) {
    const int m = Left(n, i);
    StoreN(o + i, Mul(Mul(LoadN(x + i, m), inv), LoadN(w + i, m)), m);
  }
}

float ExpRow(const float* x, float shift, float* o, int64_t n) {
  const V16 s = Set(shift);
  V16 sum = Zero();
  for (int64_t i = 0; i < n; i += 16) {
    const int m = Left(n, i);
    // Lanes past m are e^(0 − shift): kept out of the sum by the masked reload.
    const V16 e = Exp(Sub(LoadN(x + i, m), s));
    StoreN(o + i, e, m);
    sum = Add(sum, m == 16 ? e : LoadN(o + i, m));
  }
  return ReduceAdd(sum);
}

LS_SIMD_END
