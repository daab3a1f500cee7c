// GqaAttention forward: projections, norms, RoPE, paged attention, output projection.
#include "models/layers/gqa_attention.h"

#include <cmath>

#include "models/layers/row_parallel.h"

namespace ls {

GqaAttention::GqaAttention(WeightBinder& b, const std::string& prefix, const ModelConfig& config, const LayerPlan& plan)
    : c_(config.attention),
      eps_(config.rms_norm_eps),
      sliding_window_(plan.sliding_window),
      tensor_parallel_(config.tensor_parallel.on()),
      rope_(ComputeRopeTable(c_.rope)) {
  // Tensor parallelism: this rank's heads of q (and o's columns for them), and the key/value
  // heads they read — its share of them, or the one they share when the group outnumbers them.
  const TensorParallel& tp = config.tensor_parallel;
  const int32_t kv_parts = c_.num_kv_heads % tp.size == 0 ? tp.size : c_.num_kv_heads;
  const int32_t kv_index = tp.rank / (tp.size / kv_parts);
  const int64_t d = config.hidden_size, q_width = static_cast<int64_t>(c_.num_heads) * c_.head_dim,
                kv_width = static_cast<int64_t>(c_.num_kv_heads) * c_.head_dim;
  q_ = b.GetPart(prefix + "q_proj.weight", q_width, d, Split::kRows, tp.size, tp.rank);
  k_ = b.GetPart(prefix + "k_proj.weight", kv_width, d, Split::kRows, kv_parts, kv_index);
  v_ = b.GetPart(prefix + "v_proj.weight", kv_width, d, Split::kRows, kv_parts, kv_index);
  o_ = b.GetPart(prefix + "o_proj.weight", d, q_width, Split::kCols, tp.size, tp.rank);
  if (c_.qkv_bias) {
    q_bias_ = b.GetPart(prefix + "q_proj.bias", 0, q_width, Split::kCols, tp.size, tp.rank);
    k_bias_ = b.GetPart(prefix + "k_proj.bias", 0, kv_width, Split::kCols, kv_parts, kv_index);
    v_bias_ = b.GetPart(prefix + "v_proj.bias", 0, kv_width, Split::kCols, kv_parts, kv_index);
  }
  if (c_.o_bias) o_bias_ = b.Get(prefix + "o_proj.bias", 0, d);
  c_.num_heads /= tp.size;
  c_.num_kv_heads /= kv_parts;
  if (c_.qk_norm) {
    q_norm_ = b.Get(prefix + "q_norm.weight", 0, c_.head_dim);
    k_norm_ = b.Get(prefix + "k_norm.weight", 0, c_.head_dim);
  }
}

KvLayerSpec GqaAttention::kv_spec() const {
  const int64_t width = static_cast<int64_t>(c_.num_kv_heads) * c_.head_dim;
  return KvLayerSpec{width, width};
}

void GqaAttention::Forward(StepContext& ctx, int32_t layer, const float* h, float* x) {
  Backend* be = ctx.backend;
  GqaScratch& s = ctx.buf->Scratch<GqaScratch>();
  const int64_t T = ctx.num_tokens, H = c_.num_heads, Hkv = c_.num_kv_heads, hd = c_.head_dim;
  float* q = s.q.as<float>(T * H * hd);
  float* k = s.k.as<float>(T * Hkv * hd);
  float* v = s.v.as<float>(T * Hkv * hd);
  float* o = s.out.as<float>(T * H * hd);
  {
    PartTimer t(ctx.profile, StepPart::kAttentionIn);
    const GemmOutput qkv[] = {{&q_, q}, {&k_, k}, {&v_, v}};
    be->GemmMany(h, T, qkv, 3);
    if (c_.qkv_bias) {
      be->AddBias(q, T, q_bias_);
      be->AddBias(k, T, k_bias_);
      be->AddBias(v, T, v_bias_);
    }
    if (c_.qk_norm) {
      be->RmsNorm(q, T * H, q_norm_, eps_, q);
      be->RmsNorm(k, T * Hkv, k_norm_, eps_, k);
    }
    if (c_.rope.rotary_dim > 0) {
      be->Rope(q, T, ctx.positions, rope_.Params(c_.rope, c_.num_heads, c_.head_dim));
      be->Rope(k, T, ctx.positions, rope_.Params(c_.rope, c_.num_kv_heads, c_.head_dim));
    }
  }
  AttentionParams p;
  p.q = q;
  p.k_new = k;
  p.v_new = v;
  p.out = o;
  p.num_heads = c_.num_heads;
  p.num_kv_heads = c_.num_kv_heads;
  p.head_dim = c_.head_dim;
  p.scale = 1.f / std::sqrt(static_cast<float>(c_.head_dim));
  p.sliding_window = sliding_window_;
  p.cache = ctx.cache->layer(layer);
  p.seqs = ctx.seqs->data();
  p.num_seqs = static_cast<int32_t>(ctx.seqs->size());
  {
    PartTimer t(ctx.profile, StepPart::kAttention);
    be->PagedAttention(p);
  }
  PartTimer t(ctx.profile, StepPart::kAttentionOut);
  AddRowParallel(ctx, o, T, o_, tensor_parallel_, x);
  if (c_.o_bias) be->AddBias(x, T, o_bias_);
}

void GqaAttention::ForEachWeight(const WeightFn& fn) {
  for (Tensor* t : {&q_, &k_, &v_, &o_}) fn(*t, WeightUse::kMatmul);
  for (Tensor* t : {&q_bias_, &k_bias_, &v_bias_, &o_bias_, &q_norm_, &k_norm_})
    if (!t->empty()) fn(*t, WeightUse::kOther);
}

}  // namespace ls
