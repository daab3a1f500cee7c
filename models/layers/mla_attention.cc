// MlaAttention: binding (with the per-head key up-projections transposed once at load) and the
// absorbed forward.
#include "models/layers/mla_attention.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ls {

MlaAttention::MlaAttention(WeightBinder& b, const std::string& prefix, const ModelConfig& config,
                           const RopeTable* rope)
    : c_(config.mla), rope_(rope), qh_(c_.qk_nope_head_dim + c_.qk_rope_head_dim) {
  const int64_t d = config.hidden_size, H = c_.num_heads, L = c_.kv_lora_rank, R = c_.qk_rope_head_dim,
                nope = c_.qk_nope_head_dim, v = c_.v_head_dim;
  if (c_.q_lora_rank > 0) {
    q_a_ = b.Get(prefix + "q_a_proj.weight", c_.q_lora_rank, d);
    if (c_.bias) q_a_bias_ = b.Get(prefix + "q_a_proj.bias", 0, c_.q_lora_rank);
    q_a_norm_ = b.Get(prefix + "q_a_layernorm.weight", 0, c_.q_lora_rank);
    q_b_ = b.Get(prefix + "q_b_proj.weight", H * qh_, c_.q_lora_rank);
  } else {
    q_ = b.Get(prefix + "q_proj.weight", H * qh_, d);
  }
  // kv_a_proj_with_mqa's rows: the latent first, then the rope key.
  const Tensor kv_a = b.Get(prefix + "kv_a_proj_with_mqa.weight", L + R, d);
  if (!kv_a.empty()) {
    kv_a_c_ = kv_a.RowSlice(0, L);
    kv_a_rope_ = kv_a.RowSlice(L, R);
  }
  if (c_.bias) {
    const Tensor bias = b.Get(prefix + "kv_a_proj_with_mqa.bias", 0, L + R);
    if (!bias.empty()) {
      const size_t es = DTypeSize(bias.dtype);
      kv_a_c_bias_ = Tensor{bias.data, bias.dtype, 1, L};
      kv_a_rope_bias_ = Tensor{static_cast<const unsigned char*>(bias.data) + L * es, bias.dtype, 1, R};
    }
  }
  kv_a_norm_ = b.Get(prefix + "kv_a_layernorm.weight", 0, L);
  // kv_b_proj: per head qk_nope key rows, then v value rows, over the latent.
  const Tensor kv_b = b.Get(prefix + "kv_b_proj.weight", H * (nope + v), L);
  if (c_.output_gate) g_ = b.Get(prefix + "g_proj.weight", H * v, d);
  o_ = b.Get(prefix + "o_proj.weight", d, H * v);
  if (c_.bias) o_bias_ = b.Get(prefix + "o_proj.bias", 0, d);
  if (kv_b.empty()) return;
  const size_t es = DTypeSize(kv_b.dtype);
  uk_t_bytes_.resize(static_cast<size_t>(H * L * nope) * es);
  for (int64_t h = 0; h < H; ++h) {
    // W_UK_h is rows [h·(nope+v), h·(nope+v)+nope) of kv_b_proj: [nope, L]; its transpose [L, nope].
    const auto* src = static_cast<const unsigned char*>(kv_b.data) + h * (nope + v) * L * es;
    unsigned char* dst = uk_t_bytes_.data() + h * L * nope * es;
    for (int64_t i = 0; i < nope; ++i)
      for (int64_t j = 0; j < L; ++j) std::memcpy(dst + (j * nope + i) * es, src + (i * L + j) * es, es);
    uk_t_.push_back(Tensor{dst, kv_b.dtype, L, nope});
    uv_.push_back(kv_b.RowSlice(h * (nope + v) + nope, v));
  }
}

void MlaAttention::ForEachWeight(const WeightFn& fn) {
  for (Tensor* t : {&q_a_, &q_b_, &q_, &kv_a_c_, &kv_a_rope_, &g_, &o_})
    if (!t->empty()) fn(*t, WeightUse::kMatmul);
  for (Tensor* t : {&q_a_bias_, &q_a_norm_, &kv_a_c_bias_, &kv_a_rope_bias_, &kv_a_norm_, &o_bias_})
    if (!t->empty()) fn(*t, WeightUse::kOther);
  for (auto* list : {&uk_t_, &uv_})
    for (Tensor& t : *list) fn(t, WeightUse::kMatmul);
}

void MlaAttention::WeightsPrepared() {
  // The backend keeps its own copies of the transposed key projections (packed, or on the device).
  if (!uk_t_.empty() && uk_t_[0].data != uk_t_bytes_.data()) uk_t_bytes_ = {};
}

void MlaAttention::Forward(StepContext& ctx, int32_t layer, const float* h, float* x) {
  Backend* be = ctx.backend;
  StepBuffers& buf = *ctx.buf;
  const int64_t T = ctx.num_tokens, H = c_.num_heads, L = c_.kv_lora_rank, R = c_.qk_rope_head_dim,
                nope = c_.qk_nope_head_dim, v = c_.v_head_dim;
  float* q = buf.q.as<float>(T * H * qh_);      // [T, H, nope + R]
  float* c = buf.k.as<float>(T * (L + R));      // [T, L] latents, then [T, R] rope keys
  float* k_rope = c + T * L;
  float* q_lat = buf.v.as<float>(T * H * L);    // [T, H, L] absorbed queries
  float* o_lat = buf.attn.as<float>(T * H * (L + v));  // [T, H, L] attention output, then [T, H, v] values
  float* o = o_lat + T * H * L;
  {
    PartTimer t(ctx.profile, StepPart::kAttentionIn);
    if (c_.q_lora_rank > 0) {
      float* qa = buf.gate.as<float>(T * c_.q_lora_rank);
      be->Gemm(h, T, q_a_, qa, false);
      if (c_.bias) be->AddBias(qa, T, q_a_bias_);
      be->RmsNorm(qa, T, q_a_norm_, c_.norm_eps, qa);
      be->Gemm(qa, T, q_b_, q, false);
    } else {
      be->Gemm(h, T, q_, q, false);
    }
    const GemmOutput kv[] = {{&kv_a_c_, c}, {&kv_a_rope_, k_rope}};
    be->GemmMany(h, T, kv, 2);
    if (c_.bias) {
      be->AddBias(c, T, kv_a_c_bias_);
      be->AddBias(k_rope, T, kv_a_rope_bias_);
    }
    be->RmsNorm(c, T, kv_a_norm_, c_.norm_eps, c);
    if (c_.use_rope) {
      // The rope dims of each query head, and the one shared rope key.
      RopeParams qp = rope_->Params(c_.rope, static_cast<int32_t>(H), static_cast<int32_t>(qh_));
      be->Rope(q + nope, T, ctx.positions, qp);
      be->Rope(k_rope, T, ctx.positions, rope_->Params(c_.rope, 1, static_cast<int32_t>(R)));
    }
    // q_latent_h = W_UK_hᵀ q_nope_h for every head.
    be->HeadGemm(q, RowStrides{H * qh_, qh_}, T, static_cast<int32_t>(H), uk_t_.data(), q_lat, RowStrides{H * L, L});
  }
  LatentAttentionParams p;
  p.q_latent = q_lat;
  p.q_rope = q + nope;
  p.q_rope_stride = qh_;
  p.c_new = c;
  p.k_rope_new = k_rope;
  p.out = o_lat;
  p.num_heads = static_cast<int32_t>(H);
  p.latent_dim = static_cast<int32_t>(L);
  p.rope_dim = static_cast<int32_t>(R);
  p.scale = c_.softmax_scale;
  p.cache = ctx.cache->layer(layer);
  p.seqs = ctx.seqs->data();
  p.num_seqs = static_cast<int32_t>(ctx.seqs->size());
  {
    PartTimer t(ctx.profile, StepPart::kAttention);
    be->PagedLatentAttention(p);
  }
  PartTimer t(ctx.profile, StepPart::kAttentionOut);
  // Values: o_h = W_UV_h · (Σ p c) per head, then the output projection over the heads.
  be->HeadGemm(o_lat, RowStrides{H * L, L}, T, static_cast<int32_t>(H), uv_.data(), o, RowStrides{H * v, v});
  if (c_.output_gate) {  // the heads' output times σ(g_proj(x)), x the input norm's output
    float* gate = buf.gate.as<float>(T * H * v);
    be->Gemm(h, T, g_, gate, false);
    be->MulSigmoid(o, T, H * v, gate, H * v);
  }
  be->Gemm(o, T, o_, x, /*accumulate=*/true);
  if (c_.bias) be->AddBias(x, T, o_bias_);
}

}  // namespace ls
