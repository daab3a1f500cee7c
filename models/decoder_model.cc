// DecoderModel: binding a pre-norm decoder's layers and running its step.
#include "models/decoder_model.h"

#include "absl/strings/str_cat.h"
#include "models/layers/glu_mlp.h"
#include "models/layers/gqa_attention.h"
#include "models/layers/kda_attention.h"
#include "models/layers/mla_attention.h"
#include "models/layers/moe_block.h"
#include "models/loader/weight_binder.h"

namespace ls {

DecoderModel::DecoderModel(ModelConfig config, std::unique_ptr<WeightStore> store, Backend* backend)
    : Model(std::move(config), std::move(store), backend),
      gqa_rope_(ComputeRopeTable(config_.attention.rope)),
      mla_rope_(ComputeRopeTable(config_.mla.rope)) {}

absl::StatusOr<std::unique_ptr<Model>> DecoderModel::Load(const Family& family, ModelConfig config,
                                                         std::unique_ptr<WeightStore> store, Backend* backend) {
  std::unique_ptr<DecoderModel> m(new DecoderModel(std::move(config), std::move(store), backend));
  const ModelConfig& c = m->config_;
  const TensorNames& names = family.names;
  WeightBinder b(*m->store_, c.quantization, names.prefix);
  const int64_t d = c.hidden_size;
  m->embed_ = b.Get("model.embed_tokens.weight", c.vocab_size, d);
  m->final_norm_ = b.Get("model.norm.weight", 0, d);
  // Tied: the embedding is the head, unless the checkpoint carries a head of its own anyway, which
  // transformers then uses.
  m->lm_head_ = c.tie_word_embeddings ? b.Optional("lm_head.weight", c.vocab_size, d) : b.Get("lm_head.weight", c.vocab_size, d);
  if (m->lm_head_.empty() && b.status().ok()) m->lm_head_ = m->embed_;
  m->layers_.resize(c.num_hidden_layers);
  for (int32_t i = 0; i < c.num_hidden_layers && b.status().ok(); ++i) {
    Layer& L = m->layers_[i];
    const std::string p = absl::StrCat("model.layers.", i, ".");
    L.input_norm = b.Get(p + "input_layernorm.weight", 0, d);
    L.post_attention_norm = b.Get(p + "post_attention_layernorm.weight", 0, d);
    if (c.attn_res_block_size > 0) {
      // Layer 0 has no blocks yet to mix before its attention; its tensors are bound all the same.
      L.attention_res = AttnResMixer(b, p + "self_attention_res", d, c.rms_norm_eps);
      L.ffn_res = AttnResMixer(b, p + "mlp_res", d, c.rms_norm_eps);
    }
    switch (c.layers[i].attention) {
      case AttentionKind::kGqa:
        L.attention = std::make_unique<GqaAttention>(b, p + names.attention, c, c.layers[i], &m->gqa_rope_);
        break;
      case AttentionKind::kMla:
        L.attention = std::make_unique<MlaAttention>(b, p + names.attention, c, &m->mla_rope_);
        break;
      case AttentionKind::kKda:
        L.attention = std::make_unique<KdaAttention>(b, p + names.attention, c);
        break;
    }
    if (c.is_moe_layer(i)) {
      auto moe = std::make_unique<MoeBlock>(b, p + names.moe.block, c, names.moe);
      m->moe_blocks_[i] = moe.get();
      L.ffn = std::move(moe);
    } else {
      std::string mlp = p + names.dense_mlp;
      if (!names.dense_mlp_alt.empty() && !b.Has(mlp + "gate_proj.weight") &&
          b.Has(p + names.dense_mlp_alt + "gate_proj.weight"))
        mlp = p + names.dense_mlp_alt;
      L.ffn = std::make_unique<GluMlp>(b, mlp, GluNames{}, c.intermediate_size, d, d, c.hidden_act);
    }
  }
  if (c.attn_res_block_size > 0) m->output_res_ = AttnResMixer(b, "model.output_attn_res", d, c.rms_norm_eps);
  if (!b.status().ok()) return b.status();
  const ModelConfig* cp = &c;
  auto unused_ok = family.unused_ok;
  if (auto s = b.CheckAllTaken([&](const std::string& t) { return unused_ok && unused_ok(t, *cp); }); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat(m->store_->dir(), ": ", s.message()));
  m->dtype_ = m->embed_.dtype;
  if (auto s = m->PrepareWeights([&](const WeightFn& fn) { m->ForEachWeight(fn); }); !s.ok()) return s;
  for (Layer& L : m->layers_) L.attention->WeightsPrepared();
  return std::unique_ptr<Model>(std::move(m));
}

void DecoderModel::ForEachWeight(const WeightFn& fn) {
  fn(embed_, WeightUse::kOther);
  fn(final_norm_, WeightUse::kOther);
  fn(lm_head_, WeightUse::kMatmulHead);  // tied: its own GEMM copy of the table's host view
  auto other = [&](Tensor& t) {
    if (!t.empty()) fn(t, WeightUse::kOther);
  };
  for (Layer& L : layers_) {
    fn(L.input_norm, WeightUse::kOther);
    fn(L.post_attention_norm, WeightUse::kOther);
    L.attention->ForEachWeight(fn);
    L.ffn->ForEachWeight(fn);
    L.attention_res.ForEachWeight(other);
    L.ffn_res.ForEachWeight(other);
  }
  output_res_.ForEachWeight(other);
}

std::vector<KvLayerSpec> DecoderModel::kv_layout() const {
  const GqaConfig& a = config_.attention;
  const int64_t gqa = static_cast<int64_t>(a.num_kv_heads) * a.head_dim;
  const int64_t mla = config_.mla.kv_lora_rank + config_.mla.qk_rope_head_dim;
  std::vector<KvLayerSpec> out;
  for (const LayerPlan& l : config_.layers) {
    switch (l.attention) {
      case AttentionKind::kGqa: out.push_back(KvLayerSpec{gqa, gqa}); break;
      case AttentionKind::kMla: out.push_back(KvLayerSpec{mla, 0}); break;
      case AttentionKind::kKda: out.push_back(KvLayerSpec{0, 0, config_.kda.state_floats()}); break;
    }
  }
  return out;
}

absl::Status DecoderModel::Forward(const StepBatch& batch, KvCache& cache, std::vector<float>* logits) {
  if (auto s = BeginStep(batch, cache, &positions_, &seqs_); !s.ok()) return s;
  const int64_t T = static_cast<int64_t>(batch.tokens.size()), d = config_.hidden_size;
  StepContext ctx = Context(T, positions_, seqs_, cache);
  float* x = buf_.x.as<float>(T * d);
  {
    PartTimer t(profile_, StepPart::kEmbedding);
    backend_->Embedding(batch.tokens.data(), T, embed_, x);
  }
  x = config_.attn_res_block_size > 0 ? RunLayersWithAttnRes(ctx, x) : RunLayers(ctx, x);
  Logits(batch, seqs_, x, final_norm_, lm_head_, logits);
  return absl::OkStatus();
}

float* DecoderModel::RunLayers(StepContext& ctx, float* x) {
  const int64_t T = ctx.num_tokens, d = config_.hidden_size;
  for (int32_t l = 0; l < config_.num_hidden_layers; ++l) {
    Layer& L = layers_[l];
    float* h = buf_.h.as<float>(T * d);
    {
      PartTimer t(profile_, StepPart::kAttentionIn);
      backend_->RmsNorm(x, T, L.input_norm, config_.rms_norm_eps, h);
    }
    L.attention->Forward(ctx, l, h, x);
    {
      PartTimer t(profile_, config_.is_moe_layer(l) ? StepPart::kRouter : StepPart::kSharedOrDense);
      backend_->RmsNorm(x, T, L.post_attention_norm, config_.rms_norm_eps, h);
    }
    L.ffn->Forward(ctx, l, h, x);
  }
  return x;
}

// The AttnRes recurrence (docs/math.md, "Attention residuals"): per layer l, p = h; the attention
// reads AR(p, blocks) (h itself before any block exists); at a block's first layer p joins the
// blocks and the stream restarts (p = the attention's output alone); the FFN reads
// AR(p + attention, blocks) and h = p + FFN. After the last layer h = AR(h, blocks).
float* DecoderModel::RunLayersWithAttnRes(StepContext& ctx, float* x) {
  const int64_t T = ctx.num_tokens, d = config_.hidden_size, B = config_.attn_res_block_size;
  const int64_t max_blocks = (config_.num_hidden_layers + B - 1) / B;
  float* blocks = buf_.res_blocks.as<float>(max_blocks * T * d);
  float* mixed = buf_.res_mix.as<float>(T * d);
  float* other = buf_.res_other.as<float>(T * d);  // the stream's second buffer, for restarts
  int32_t num_blocks = 0;
  for (int32_t l = 0; l < config_.num_hidden_layers; ++l) {
    Layer& L = layers_[l];
    float* h = buf_.h.as<float>(T * d);
    {
      PartTimer t(profile_, StepPart::kAttentionIn);
      const float* attention_in = x;
      if (num_blocks > 0) {
        L.attention_res.Mix(ctx, blocks, num_blocks, x, mixed);
        attention_in = mixed;
      }
      backend_->RmsNorm(attention_in, T, L.input_norm, config_.rms_norm_eps, h);
      if (l % B == 0) {  // a new block: the stream so far is kept, and restarts from zero
        backend_->Copy(blocks + num_blocks * T * d, x, T * d);
        ++num_blocks;
        std::swap(x, other);
        backend_->SetZero(x, T * d);
      }
    }
    L.attention->Forward(ctx, l, h, x);
    {
      PartTimer r(profile_, config_.is_moe_layer(l) ? StepPart::kRouter : StepPart::kSharedOrDense);
      L.ffn_res.Mix(ctx, blocks, num_blocks, x, mixed);
      backend_->RmsNorm(mixed, T, L.post_attention_norm, config_.rms_norm_eps, h);
    }
    L.ffn->Forward(ctx, l, h, x);
  }
  output_res_.Mix(ctx, blocks, num_blocks, x, mixed);
  return mixed;
}

}  // namespace ls
