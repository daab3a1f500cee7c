// CPU Kimi Delta Attention (KdaParams), one task per (sequence, head) over its recurrent state
// S [d, d] (row i: key channel i). Short runs of new tokens take the recurrent form, two passes
// over S per token; longer ones the chunked (WY) form, chunks of up to p.chunk tokens:
//   gc = cumulative log decay within the chunk, kb = β·k̂, vb = β·v,
//   A[i][j] = −Σ_c kb_i[c]·k̂_j[c]·e^(gc_i[c] − gc_j[c]) for j < i, made (I + A)'s inverse-like
//   T by forward substitution, u = T·vb, w = T·(kb ⊙ e^gc),
//   out_i = (q̂_i ⊙ e^gc_i)·S + Σ_{j≤i} (Σ_c q̂_i[c]·k̂_j[c]·e^(gc_i[c] − gc_j[c]))·(u_j − w_j·S),
//   S ← e^gc_last ⊙ S + Σ_i (k̂_i ⊙ e^(gc_last − gc_i)) ⊗ (u_i − w_i·S),
// the same recurrence regrouped into matrix products.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/dtype.h"

namespace ls::cpu {
namespace {

// Per-token inputs of one head after normalisation: q̂ (scaled), k̂, v, log decay, β.
struct TokenInputs {
  std::vector<float> q, k, v, g;  // [n, d] each
  std::vector<float> beta;        // [n]
};

void Normalize(const float* x, int32_t d, float scale, float* out) {
  float ss = 0.f;
  for (int32_t i = 0; i < d; ++i) ss += x[i] * x[i];
  const float inv = scale / std::sqrt(ss + 1e-6f);
  for (int32_t i = 0; i < d; ++i) out[i] = x[i] * inv;
}

float Softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }

void Gather(const KdaParams& p, const AttentionSeq& s, int32_t h, TokenInputs* in) {
  const int32_t d = p.head_dim, H = p.num_heads, n = s.num_tokens;
  in->q.resize(static_cast<size_t>(n) * d);
  in->k.resize(in->q.size());
  in->v.resize(in->q.size());
  in->g.resize(in->q.size());
  in->beta.resize(n);
  const float a = std::exp(LoadAsF32(p.a_log.data, p.a_log.dtype, h));
  const float qscale = 1.f / std::sqrt(static_cast<float>(d));
  for (int32_t i = 0; i < n; ++i) {
    const int64_t row = (static_cast<int64_t>(s.token_offset) + i) * H + h;
    Normalize(p.q + row * d, d, qscale, in->q.data() + static_cast<size_t>(i) * d);
    Normalize(p.k + row * d, d, 1.f, in->k.data() + static_cast<size_t>(i) * d);
    std::copy_n(p.v + row * d, d, in->v.data() + static_cast<size_t>(i) * d);
    in->beta[i] = Sigmoid(p.beta[row]);
    float* gi = in->g.data() + static_cast<size_t>(i) * d;
    for (int32_t c = 0; c < d; ++c)
      gi[c] = p.graw[row * d + c] + LoadAsF32(p.dt_bias.data, p.dt_bias.dtype, static_cast<int64_t>(h) * d + c);
    if (p.gate == KdaGate::kSoftplus) {
      for (int32_t c = 0; c < d; ++c) gi[c] = -a * Softplus(gi[c]);
    } else {
      for (int32_t c = 0; c < d; ++c) gi[c] *= a;
      SigmoidRow(gi, gi, d);
      for (int32_t c = 0; c < d; ++c) gi[c] *= p.lower_bound;
    }
  }
}

void Recurrent(const TokenInputs& in, int32_t first, int32_t n, int32_t d, float* S, float* out, int64_t out_stride) {
  thread_local std::vector<float> u, delta, decays;
  u.resize(d);
  delta.resize(d);
  decays.resize(d);
  for (int32_t t = first; t < first + n; ++t) {
    const float* q = in.q.data() + static_cast<size_t>(t) * d;
    const float* k = in.k.data() + static_cast<size_t>(t) * d;
    const float* v = in.v.data() + static_cast<size_t>(t) * d;
    ExpRow(in.g.data() + static_cast<size_t>(t) * d, 0.f, decays.data(), d);
    std::fill(u.begin(), u.end(), 0.f);
    for (int32_t i = 0; i < d; ++i) {
      float* row = S + static_cast<size_t>(i) * d;
      const float decay = decays[i];
      for (int32_t j = 0; j < d; ++j) row[j] *= decay;
      Axpy(k[i], row, u.data(), d);
    }
    for (int32_t j = 0; j < d; ++j) delta[j] = in.beta[t] * (v[j] - u[j]);
    float* o = out + static_cast<int64_t>(t) * out_stride;
    std::fill_n(o, d, 0.f);
    for (int32_t i = 0; i < d; ++i) {
      float* row = S + static_cast<size_t>(i) * d;
      Axpy(k[i], delta.data(), row, d);
      Axpy(q[i], row, o, d);
    }
  }
}

void Chunk(const TokenInputs& in, int32_t first, int32_t n, int32_t d, float* S, float* out, int64_t out_stride) {
  thread_local std::vector<float> gc, A, u, w, e, qe, vnew, kd;
  gc.assign(static_cast<size_t>(n) * d, 0.f);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t c = 0; c < d; ++c)
      gc[static_cast<size_t>(i) * d + c] =
          (i ? gc[static_cast<size_t>(i - 1) * d + c] : 0.f) + in.g[static_cast<size_t>(first + i) * d + c];
  auto K = [&](int32_t i) { return in.k.data() + static_cast<size_t>(first + i) * d; };
  auto Q = [&](int32_t i) { return in.q.data() + static_cast<size_t>(first + i) * d; };
  auto V = [&](int32_t i) { return in.v.data() + static_cast<size_t>(first + i) * d; };
  auto G = [&](int32_t i) { return gc.data() + static_cast<size_t>(i) * d; };
  auto beta = [&](int32_t i) { return in.beta[first + i]; };
  // e^(G(i)[c] − G(j)[c]) · a[c] · b[c] summed over c (the vector kernels' exp and dot).
  thread_local std::vector<float> diff, prod;
  diff.resize(d);
  prod.resize(d);
  auto decayed_dot = [&](const float* a, const float* b, int32_t i, int32_t j) {
    for (int32_t c = 0; c < d; ++c) diff[c] = G(i)[c] - G(j)[c], prod[c] = a[c] * b[c];
    ExpRow(diff.data(), 0.f, diff.data(), d);
    return Dot(prod.data(), diff.data(), d);
  };
  // A (strictly lower), then its forward substitution, plus the identity.
  A.assign(static_cast<size_t>(n) * n, 0.f);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = 0; j < i; ++j) A[static_cast<size_t>(i) * n + j] = -beta(i) * decayed_dot(K(i), K(j), i, j);
  std::vector<float> row(n);
  for (int32_t i = 1; i < n; ++i) {
    float* ai = A.data() + static_cast<size_t>(i) * n;
    std::copy_n(ai, i, row.data());
    for (int32_t j = 0; j < i; ++j) {
      float s = 0.f;
      for (int32_t m = j + 1; m < i; ++m) s += row[m] * A[static_cast<size_t>(m) * n + j];
      ai[j] = row[j] + s;
    }
  }
  for (int32_t i = 0; i < n; ++i) A[static_cast<size_t>(i) * n + i] = 1.f;
  // u = A·(β v), w = A·(β k ⊙ e^gc).
  u.assign(static_cast<size_t>(n) * d, 0.f);
  w.assign(static_cast<size_t>(n) * d, 0.f);
  e.resize(static_cast<size_t>(n) * d);
  for (int32_t j = 0; j < n; ++j) {
    float* ej = e.data() + static_cast<size_t>(j) * d;
    ExpRow(G(j), 0.f, ej, d);
    for (int32_t c = 0; c < d; ++c) ej[c] = beta(j) * K(j)[c] * ej[c];
  }
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = 0; j <= i; ++j) {
      const float a = A[static_cast<size_t>(i) * n + j];
      Axpy(a * beta(j), V(j), u.data() + static_cast<size_t>(i) * d, d);
      Axpy(a, e.data() + static_cast<size_t>(j) * d, w.data() + static_cast<size_t>(i) * d, d);
    }
  // v_new = u − w·S; out = (q ⊙ e^gc)·S + intra·v_new.
  vnew.assign(static_cast<size_t>(n) * d, 0.f);
  qe.resize(d);
  for (int32_t i = 0; i < n; ++i) {
    float* vn = vnew.data() + static_cast<size_t>(i) * d;
    std::copy_n(u.data() + static_cast<size_t>(i) * d, d, vn);
    float* o = out + static_cast<int64_t>(first + i) * out_stride;
    std::fill_n(o, d, 0.f);
    const float* wi = w.data() + static_cast<size_t>(i) * d;
    ExpRow(G(i), 0.f, qe.data(), d);
    for (int32_t c = 0; c < d; ++c) {
      const float* srow = S + static_cast<size_t>(c) * d;
      Axpy(-wi[c], srow, vn, d);
      Axpy(Q(i)[c] * qe[c], srow, o, d);
    }
  }
  for (int32_t i = 0; i < n; ++i) {
    float* o = out + static_cast<int64_t>(first + i) * out_stride;
    for (int32_t j = 0; j <= i; ++j) Axpy(decayed_dot(Q(i), K(j), i, j), vnew.data() + static_cast<size_t>(j) * d, o, d);
  }
  // S ← e^gc_last ⊙ S + Σ_i (k_i ⊙ e^(gc_last − gc_i)) ⊗ v_new_i.
  const float* last = G(n - 1);
  // kd[i][c] = k_i[c] · e^(gc_last[c] − gc_i[c]); decay[c] = e^gc_last[c].
  kd.resize(static_cast<size_t>(n) * d + d);
  float* decay = kd.data() + static_cast<size_t>(n) * d;
  ExpRow(last, 0.f, decay, d);
  for (int32_t i = 0; i < n; ++i) {
    float* ki = kd.data() + static_cast<size_t>(i) * d;
    for (int32_t c = 0; c < d; ++c) ki[c] = last[c] - G(i)[c];
    ExpRow(ki, 0.f, ki, d);
    for (int32_t c = 0; c < d; ++c) ki[c] *= K(i)[c];
  }
  for (int32_t c = 0; c < d; ++c) {
    float* srow = S + static_cast<size_t>(c) * d;
    for (int32_t j = 0; j < d; ++j) srow[j] *= decay[c];
    for (int32_t i = 0; i < n; ++i) Axpy(kd[static_cast<size_t>(i) * d + c], vnew.data() + static_cast<size_t>(i) * d, srow, d);
  }
}

}  // namespace

void KdaAttention(ThreadPool& pool, const KdaParams& p) {
  const int32_t H = p.num_heads, d = p.head_dim;
  pool.ParallelFor(static_cast<int64_t>(p.num_seqs) * H, [&](int64_t task) {
    const AttentionSeq& s = p.seqs[task / H];
    const int32_t h = static_cast<int32_t>(task % H);
    if (s.num_tokens == 0) return;
    float* S = p.cache.state + static_cast<int64_t>(s.state_slot) * p.cache.state_floats +
               static_cast<int64_t>(h) * d * d;
    if (s.start_pos == 0) std::fill_n(S, static_cast<size_t>(d) * d, 0.f);
    thread_local TokenInputs in;
    Gather(p, s, h, &in);
    float* out = p.out + (static_cast<int64_t>(s.token_offset) * H + h) * d;
    const int64_t stride = static_cast<int64_t>(H) * d;
    if (p.chunk <= 0 || s.num_tokens <= p.chunk) {
      Recurrent(in, 0, s.num_tokens, d, S, out, stride);
      return;
    }
    for (int32_t first = 0; first < s.num_tokens; first += p.chunk)
      Chunk(in, first, std::min(p.chunk, s.num_tokens - first), d, S, out, stride);
  });
}

}  // namespace ls::cpu
