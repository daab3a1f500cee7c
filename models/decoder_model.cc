// DecoderModel: binding a pre-norm decoder's layers and running its step.
#include "models/decoder_model.h"

#include "absl/strings/str_cat.h"
#include "models/layers/glu_mlp.h"
#include "models/layers/gqa_attention.h"
#include "models/layers/moe_block.h"
#include "models/loader/weight_binder.h"

namespace ls {

DecoderModel::DecoderModel(ModelConfig config, std::unique_ptr<WeightStore> store, Backend* backend)
    : Model(std::move(config), std::move(store), backend), rope_(ComputeRopeTable(config_.attention.rope)) {}

absl::StatusOr<std::unique_ptr<Model>> DecoderModel::Load(const Family& family, ModelConfig config,
                                                         std::unique_ptr<WeightStore> store, Backend* backend) {
  std::unique_ptr<DecoderModel> m(new DecoderModel(std::move(config), std::move(store), backend));
  const ModelConfig& c = m->config_;
  const TensorNames& names = family.names;
  WeightBinder b(*m->store_, c.quantization);
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
    L.attention = std::make_unique<GqaAttention>(b, p + names.attention, c, c.layers[i], &m->rope_);
    if (c.is_moe_layer(i)) {
      auto moe = std::make_unique<MoeBlock>(b, p + names.moe.block, c, names.moe);
      m->moe_blocks_[i] = moe.get();
      L.ffn = std::move(moe);
    } else {
      L.ffn = std::make_unique<GluMlp>(b, p + names.dense_mlp, GluNames{}, c.intermediate_size, d, d, c.hidden_act);
    }
  }
  if (!b.status().ok()) return b.status();
  const ModelConfig* cp = &c;
  auto unused_ok = family.unused_ok;
  if (auto s = b.CheckAllTaken([&](const std::string& t) { return unused_ok && unused_ok(t, *cp); }); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat(m->store_->dir(), ": ", s.message()));
  m->dtype_ = m->embed_.dtype;
  if (auto s = m->PrepareWeights([&](const WeightFn& fn) { m->ForEachWeight(fn); }); !s.ok()) return s;
  return std::unique_ptr<Model>(std::move(m));
}

void DecoderModel::ForEachWeight(const WeightFn& fn) {
  fn(embed_, WeightUse::kOther);
  fn(final_norm_, WeightUse::kOther);
  fn(lm_head_, WeightUse::kMatmulHead);  // tied: its own GEMM copy of the table's host view
  for (Layer& L : layers_) {
    fn(L.input_norm, WeightUse::kOther);
    fn(L.post_attention_norm, WeightUse::kOther);
    L.attention->ForEachWeight(fn);
    L.ffn->ForEachWeight(fn);
  }
}

std::vector<KvLayerSpec> DecoderModel::kv_layout() const {
  const GqaConfig& a = config_.attention;
  const int64_t width = static_cast<int64_t>(a.num_kv_heads) * a.head_dim;
  return std::vector<KvLayerSpec>(config_.num_hidden_layers, KvLayerSpec{width, width});
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
  Logits(batch, seqs_, x, final_norm_, lm_head_, logits);
  return absl::OkStatus();
}

}  // namespace ls
