// KdaAttention: binding and the forward over the step's sequences and their state slots.
#include "models/layers/kda_attention.h"

#include "models/layers/row_parallel.h"

namespace ls {

KdaAttention::KdaAttention(WeightBinder& b, const std::string& prefix, const ModelConfig& config)
    : c_(config.kda), eps_(config.rms_norm_eps), tensor_parallel_(config.tensor_parallel.on()) {
  const int64_t d = config.hidden_size, H = c_.num_heads, hd = c_.head_dim, C = H * hd, K = c_.conv_kernel;
  // Tensor parallelism: this rank's heads — their channels of every per-channel weight, their
  // columns of o_proj — and so their share of each sequence's state.
  const int32_t T = config.tensor_parallel.size, r = config.tensor_parallel.rank;
  q_ = b.GetPart(prefix + "q_proj.weight", C, d, Split::kRows, T, r);
  k_ = b.GetPart(prefix + "k_proj.weight", C, d, Split::kRows, T, r);
  v_ = b.GetPart(prefix + "v_proj.weight", C, d, Split::kRows, T, r);
  q_conv_ = b.GetShaped(prefix + "q_conv1d.weight", {C, 1, K}, T, r);
  k_conv_ = b.GetShaped(prefix + "k_conv1d.weight", {C, 1, K}, T, r);
  v_conv_ = b.GetShaped(prefix + "v_conv1d.weight", {C, 1, K}, T, r);
  f_a_ = b.Get(prefix + "f_a_proj.weight", hd, d);
  f_b_ = b.GetPart(prefix + "f_b_proj.weight", C, hd, Split::kRows, T, r);
  b_ = b.GetPart(prefix + "b_proj.weight", H, d, Split::kRows, T, r);
  // A_log: [1, 1, H, 1] as transformers saves it, or a vector of which the first H are used.
  a_log_ = b.GetVectorAtLeast(prefix + "A_log", H);
  if (!a_log_.empty() && T > 1)
    a_log_ = Tensor{static_cast<const unsigned char*>(a_log_.data) + DTypeBytes(a_log_.dtype, r * (H / T)),
                    a_log_.dtype, 1, H / T};
  dt_bias_ = b.GetPart(prefix + "dt_bias", 0, C, Split::kCols, T, r);
  if (c_.full_rank_output_gate) {
    g_ = b.GetPart(prefix + "g_proj.weight", C, d, Split::kRows, T, r);
  } else {
    g_a_ = b.Get(prefix + "g_a_proj.weight", hd, d);
    g_b_ = b.GetPart(prefix + "g_b_proj.weight", C, hd, Split::kRows, T, r);
  }
  o_norm_ = b.Get(prefix + "o_norm.weight", 0, hd);
  o_ = b.GetPart(prefix + "o_proj.weight", d, C, Split::kCols, T, r);
  c_.num_heads /= T;
}

void KdaAttention::ForEachWeight(const WeightFn& fn) {
  for (Tensor* t : {&q_, &k_, &v_, &f_a_, &f_b_, &b_, &g_a_, &g_b_, &g_, &o_})
    if (!t->empty()) fn(*t, WeightUse::kMatmul);
  for (Tensor* t : {&q_conv_, &k_conv_, &v_conv_, &a_log_, &dt_bias_, &o_norm_}) fn(*t, WeightUse::kOther);
}

void KdaAttention::Forward(StepContext& ctx, int32_t layer, const float* h, float* x) {
  Backend* be = ctx.backend;
  KdaScratch& buf = ctx.buf->Scratch<KdaScratch>();
  const int64_t T = ctx.num_tokens, H = c_.num_heads, hd = c_.head_dim, C = H * hd, K = c_.conv_kernel;
  float* q0 = buf.q.as<float>(T * C);
  float* k0 = buf.k.as<float>(T * C);
  float* v0 = buf.v.as<float>(T * C);
  float* conv = buf.conv.as<float>(3 * T * C);
  float* graw = buf.forget.as<float>(T * C);
  float* beta = buf.beta.as<float>(T * H);
  float* o = buf.out.as<float>(T * C);
  float* gate = buf.gate.as<float>(T * C);
  const KvLayer cache = ctx.cache->layer(layer);
  {
    PartTimer t(ctx.profile, StepPart::kAttentionIn);
    const GemmOutput qkv[] = {{&q_, q0}, {&k_, k0}, {&v_, v0}, {&b_, beta}};
    be->GemmMany(h, T, qkv, 4);
    const Tensor* weights[] = {&q_conv_, &k_conv_, &v_conv_};
    const float* inputs[] = {q0, k0, v0};
    for (int i = 0; i < 3; ++i) {
      ShortConvParams p;
      p.in = inputs[i];
      p.out = conv + i * T * C;
      p.channels = C;
      p.weight = weights[i];
      p.kernel = static_cast<int32_t>(K);
      p.cache = cache;
      p.tail_offset = C * hd + i * (K - 1) * C;
      p.seqs = ctx.seqs->data();
      p.num_seqs = static_cast<int32_t>(ctx.seqs->size());
      be->ShortConv(p);
    }
    float* fa = buf.low_rank.as<float>(T * hd);
    be->Gemm(h, T, f_a_, fa, false);
    be->Gemm(fa, T, f_b_, graw, false);
  }
  KdaParams p;
  p.q = conv;
  p.k = conv + T * C;
  p.v = conv + 2 * T * C;
  p.graw = graw;
  p.beta = beta;
  p.out = o;
  p.num_heads = static_cast<int32_t>(H);
  p.head_dim = static_cast<int32_t>(hd);
  p.a_log = a_log_;
  p.dt_bias = dt_bias_;
  p.gate = c_.gate;
  p.lower_bound = c_.gate_lower_bound;
  p.cache = cache;
  p.seqs = ctx.seqs->data();
  p.num_seqs = static_cast<int32_t>(ctx.seqs->size());
  {
    PartTimer t(ctx.profile, StepPart::kAttention);
    be->KdaAttention(p);
  }
  PartTimer t(ctx.profile, StepPart::kAttentionOut);
  if (c_.full_rank_output_gate) {
    be->Gemm(h, T, g_, gate, false);
  } else {
    float* ga = buf.low_rank.as<float>(T * hd);
    be->Gemm(h, T, g_a_, ga, false);
    be->Gemm(ga, T, g_b_, gate, false);
  }
  be->RmsNorm(o, T * H, o_norm_, eps_, o);
  be->MulSigmoid(o, T, C, gate, C);
  AddRowParallel(ctx, o, T, o_, tensor_parallel_, x);
}

}  // namespace ls
