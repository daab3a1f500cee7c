// DecoderModel: binding a pre-norm decoder's layers and running its step.
#include "models/decoder_model.h"

#include "absl/strings/str_cat.h"
#include "models/layers/attention_kinds.h"
#include "models/layers/glu_mlp.h"
#include "models/layers/moe_block.h"
#include "models/loader/weight_binder.h"

namespace ls {

DecoderModel::DecoderModel(ModelConfig config, std::unique_ptr<WeightStore> store, Backend* backend)
    : Model(std::move(config), std::move(store), backend), last_x_(backend) {}

absl::StatusOr<std::unique_ptr<Model>> DecoderModel::Load(const Family& family, ModelConfig config,
                                                         std::unique_ptr<WeightStore> store, Backend* backend) {
  std::unique_ptr<DecoderModel> m(new DecoderModel(std::move(config), std::move(store), backend));
  const ModelConfig& c = m->config_;
  const TensorNames& names = family.names;
  WeightBinder b(*m->store_, c.quantization, names.prefix);
  const int64_t d = c.hidden_size;
  // An MTP layer's own copies of the embedding and head, where the checkpoint repeats them.
  const bool mtp = c.next_token_layer >= 0;
  const std::string mtp_prefix = absl::StrCat("model.layers.", c.next_token_layer, ".");
  // Tensor parallelism splits the vocabulary: each rank holds its rows of the embedding and head.
  const TensorParallel& tp = c.tensor_parallel;
  if (mtp) m->embed_ = b.Optional(mtp_prefix + "embed_tokens.weight", c.vocab_size, d);
  if (m->embed_.empty())
    m->embed_ = b.GetPart("model.embed_tokens.weight", c.vocab_size, d, Split::kRows, tp.size, tp.rank);
  m->final_norm_ = b.Get(mtp ? mtp_prefix + "shared_head.norm.weight" : "model.norm.weight", 0, d);
  if (mtp) m->lm_head_ = b.Optional(mtp_prefix + "shared_head.head.weight", c.vocab_size, d);
  // Tied: the embedding is the head, unless the checkpoint carries a head of its own anyway, which
  // transformers then uses.
  if (m->lm_head_.empty())
    m->lm_head_ = c.tie_word_embeddings
                      ? b.OptionalPart("lm_head.weight", c.vocab_size, d, Split::kRows, tp.size, tp.rank)
                      : b.GetPart("lm_head.weight", c.vocab_size, d, Split::kRows, tp.size, tp.rank);
  if (m->lm_head_.empty() && b.status().ok()) m->lm_head_ = m->embed_;
  if (mtp) {
    m->next_token_ = std::make_unique<NextTokenInput>();
    m->next_token_->enorm = b.Get(mtp_prefix + "enorm.weight", 0, d);
    m->next_token_->hnorm = b.Get(mtp_prefix + "hnorm.weight", 0, d);
    m->next_token_->eh_proj = b.Get(mtp_prefix + "eh_proj.weight", d, 2 * d);
  }
  m->layers_.resize(c.num_hidden_layers);
  for (int32_t i = 0; i < c.num_hidden_layers && b.status().ok(); ++i) {
    Layer& L = m->layers_[i];
    const std::string p = mtp ? mtp_prefix : absl::StrCat("model.layers.", i, ".");
    L.input_norm = b.Get(p + "input_layernorm.weight", 0, d);
    L.post_attention_norm = b.Get(p + "post_attention_layernorm.weight", 0, d);
    L.attention = NewAttentionLayer(b, p + names.attention, c, c.layers[i]);
    if (!L.attention)
      return absl::InternalError(absl::StrCat("layer ", i, ": no attention layer for kind ",
                                              static_cast<int>(c.layers[i].attention)));
    if (c.is_moe_layer(i)) {
      auto moe = std::make_unique<MoeBlock>(b, p + names.moe.block, c, names.moe);
      m->moe_blocks_[i] = moe.get();
      L.ffn = std::move(moe);
    } else {
      std::string mlp = p + names.dense_mlp;
      if (!names.dense_mlp_alt.empty() && !b.Has(mlp + "gate_proj.weight") &&
          b.Has(p + names.dense_mlp_alt + "gate_proj.weight"))
        mlp = p + names.dense_mlp_alt;
      L.ffn = std::make_unique<GluMlp>(b, mlp, GluNames{}, c.intermediate_size, d, d, c.hidden_act, tp);
    }
  }
  if (b.status().ok()) m->residual_ = NewResidualStream(b, c, backend);
  if (!b.status().ok()) return b.status();
  m->checkpoint_bytes_bound_ = b.bytes_bound();
  const ModelConfig* cp = &c;
  auto unused_ok = family.unused_ok;
  // An MTP layer reads every tensor of its own layer and none of the rest.
  auto skipped = [&](const std::string& t) {
    return mtp ? t.rfind(names.prefix + mtp_prefix, 0) != 0 : unused_ok && unused_ok(t, *cp);
  };
  if (auto s = b.CheckAllTaken(skipped); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat(m->store_->dir(), ": ", s.message()));
  m->dtype_ = m->embed_.dtype;
  if (c.shapes_only) return std::unique_ptr<Model>(std::move(m));  // counted, never run
  if (auto s = m->PrepareWeights([&](const WeightFn& fn) { m->ForEachWeight(fn); }); !s.ok()) return s;
  for (Layer& L : m->layers_) L.attention->WeightsPrepared();
  return std::unique_ptr<Model>(std::move(m));
}

void DecoderModel::ForEachWeight(const WeightFn& fn) {
  fn(embed_, WeightUse::kOther);
  fn(final_norm_, WeightUse::kOther);
  fn(lm_head_, WeightUse::kMatmulHead);  // tied: its own GEMM copy of the table's host view
  if (next_token_) {
    fn(next_token_->enorm, WeightUse::kOther);
    fn(next_token_->hnorm, WeightUse::kOther);
    fn(next_token_->eh_proj, WeightUse::kMatmul);
  }
  for (Layer& L : layers_) {
    fn(L.input_norm, WeightUse::kOther);
    fn(L.post_attention_norm, WeightUse::kOther);
    L.attention->ForEachWeight(fn);
    L.ffn->ForEachWeight(fn);
  }
  residual_->ForEachWeight(fn);
}

std::vector<KvLayerSpec> DecoderModel::kv_layout() const {
  std::vector<KvLayerSpec> out;
  for (const Layer& L : layers_) out.push_back(L.attention->kv_spec());
  return out;
}

absl::Status DecoderModel::Forward(const StepBatch& batch, KvCache& cache, std::vector<float>* logits) {
  if (auto s = BeginStep(batch, cache, &positions_, &seqs_); !s.ok()) return s;
  const int64_t T = static_cast<int64_t>(batch.tokens.size()), d = config_.hidden_size;
  StepContext ctx = Context(T, positions_, seqs_, cache);
  float* x = buf_.x.as<float>(T * d);
  if (next_token_) {
    if (auto s = NextTokenEmbedding(batch, x); !s.ok()) return s;
  } else {
    Embed(batch.tokens, x);
  }
  residual_->Begin(ctx);
  // In the last layer only the rows whose logits are asked for go on through the FFN (a prompt's
  // last token, not the whole prompt): the attention still runs over every row, which writes the
  // cache.
  const int32_t last = LastLayerRows(batch, seqs_, &last_rows_) ? config_.num_hidden_layers - 1 : -1;
  for (int32_t l = 0; l < config_.num_hidden_layers; ++l) {
    Layer& L = layers_[l];
    float* h = buf_.h.as<float>(T * d);
    {
      PartTimer t(profile_, StepPart::kAttentionIn);
      const float* in = residual_->AttentionInput(ctx, l, x);
      backend_->RmsNorm(in, T, L.input_norm, config_.rms_norm_eps, h);
    }
    L.attention->Forward(ctx, l, h, x);
    const float* in;
    {
      PartTimer t(profile_, config_.is_moe_layer(l) ? StepPart::kRouter : StepPart::kSharedOrDense);
      in = residual_->FfnInput(ctx, l, x);
      if (l != last) backend_->RmsNorm(in, T, L.post_attention_norm, config_.rms_norm_eps, h);
    }
    if (l == last) {
      LastFfnOverRows(ctx, L, l, in, x);
    } else {
      L.ffn->Forward(ctx, l, h, x);
    }
  }
  Logits(batch, seqs_, residual_->Output(ctx, x), final_norm_, lm_head_, logits);
  return absl::OkStatus();
}

void DecoderModel::LastFfnOverRows(StepContext& ctx, Layer& L, int32_t layer, const float* in, float* x) {
  const int64_t n = static_cast<int64_t>(last_rows_.size()), d = config_.hidden_size;
  // No row wants logits (a prompt's chunk before its last): nothing to compute, unless the MoE
  // layers exchange rows with a rank group, whose every rank takes part in every exchange.
  if (n == 0 && !experts_.ranks) return;
  float* h = buf_.h.as<float>(n * d);
  float* rows = last_x_.as<float>(n * d);
  {
    PartTimer t(profile_, config_.is_moe_layer(layer) ? StepPart::kRouter : StepPart::kSharedOrDense);
    backend_->GatherRows(in, last_rows_.data(), n, d, h);
    backend_->RmsNorm(h, n, L.post_attention_norm, config_.rms_norm_eps, h);
    backend_->GatherRows(x, last_rows_.data(), n, d, rows);
  }
  // Every FFN treats its rows apart, so a subset of them is the same arithmetic for those rows.
  StepContext sub = ctx;
  sub.num_tokens = n;
  L.ffn->Forward(sub, layer, h, rows);
  backend_->ScatterRows(rows, last_rows_.data(), n, d, x);
}

void DecoderModel::Embed(const std::vector<int32_t>& tokens, float* x) {
  PartTimer t(profile_, StepPart::kEmbedding);
  const int64_t T = static_cast<int64_t>(tokens.size()), d = config_.hidden_size;
  const TensorParallel& tp = config_.tensor_parallel;
  if (!tp.on()) {
    backend_->Embedding(tokens.data(), T, embed_, x);
    return;
  }
  // This rank's vocabulary rows give their tokens' rows, the others are zero; the group's sum is
  // every row.
  const int32_t first = static_cast<int32_t>(embed_.rows) * tp.rank;
  local_ids_.clear();
  local_rows_.clear();
  for (int64_t i = 0; i < T; ++i)
    if (tokens[i] >= first && tokens[i] < first + embed_.rows) {
      local_ids_.push_back(tokens[i] - first);
      local_rows_.push_back(i);
    }
  const int64_t n = static_cast<int64_t>(local_ids_.size());
  backend_->SetZero(x, T * d);
  if (n > 0) {
    float* rows = buf_.h.as<float>(n * d);
    backend_->Embedding(local_ids_.data(), n, embed_, rows);
    backend_->ScatterRows(rows, local_rows_.data(), n, d, x);
  }
  backend_->AllReduceSum(x, T * d);
}

absl::Status DecoderModel::NextTokenEmbedding(const StepBatch& batch, float* x) {
  PartTimer t(profile_, StepPart::kEmbedding);
  const int64_t T = static_cast<int64_t>(batch.tokens.size()), d = config_.hidden_size;
  if (static_cast<int64_t>(batch.prev_hidden.size()) != T * d)
    return absl::InvalidArgumentError(absl::StrCat("multi-token-prediction layer: ", batch.prev_hidden.size() / d,
                                                   " hidden rows for ", T, " tokens"));
  const float eps = config_.rms_norm_eps;
  float* e = buf_.h.as<float>(T * d);
  backend_->Embedding(batch.tokens.data(), T, embed_, e);
  backend_->RmsNorm(e, T, next_token_->enorm, eps, e);
  float* h = buf_.up.as<float>(T * d);
  backend_->CopyToDevice(h, batch.prev_hidden.data(), static_cast<size_t>(T * d) * sizeof(float));
  backend_->RmsNorm(h, T, next_token_->hnorm, eps, h);
  // [enorm(e) | hnorm(h)] side by side: read as [2T, d], e goes to the even rows and h to the odd.
  cat_rows_.resize(static_cast<size_t>(2 * T));
  for (int64_t r = 0; r < T; ++r) cat_rows_[r] = 2 * r, cat_rows_[T + r] = 2 * r + 1;
  float* cat = buf_.gate.as<float>(T * 2 * d);
  backend_->ScatterRows(e, cat_rows_.data(), T, d, cat);
  backend_->ScatterRows(h, cat_rows_.data() + T, T, d, cat);
  backend_->Gemm(cat, T, next_token_->eh_proj, x, false);
  return absl::OkStatus();
}

}  // namespace ls
