// AttnResMixer: binding and the mix through Backend::AttnResMix; AttnResStream: the blocks.
#include "models/layers/attn_res.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ls {

AttnResMixer::AttnResMixer(WeightBinder& b, const std::string& prefix, int64_t d, float eps)
    : norm_(b.Get(prefix + "_norm.weight", 0, d)), proj_(b.Get(prefix + "_proj.weight", 1, d)), d_(d), eps_(eps) {}

void AttnResMixer::Mix(StepContext& ctx, const float* blocks, int32_t num_blocks, const float* last,
                       float* out) const {
  AttnResParams p;
  p.blocks = blocks;
  p.num_blocks = num_blocks;
  p.last = last;
  p.num_tokens = ctx.num_tokens;
  p.width = d_;
  p.norm_weight = norm_;
  p.proj_weight = proj_;
  p.eps = eps_;
  p.out = out;
  ctx.backend->AttnResMix(p);
}

AttnResStream::AttnResStream(WeightBinder& b, const ModelConfig& config, Backend* backend)
    : block_size_(config.attn_res_block_size),
      d_(config.hidden_size),
      layers_(config.num_hidden_layers),
      blocks_(backend),
      mix_(backend),
      other_(backend) {
  for (int32_t l = 0; l < config.num_hidden_layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    layers_[l].attention = AttnResMixer(b, p + "self_attention_res", d_, config.rms_norm_eps);
    layers_[l].ffn = AttnResMixer(b, p + "mlp_res", d_, config.rms_norm_eps);
  }
  output_ = AttnResMixer(b, "model.output_attn_res", d_, config.rms_norm_eps);
}

void AttnResStream::Begin(StepContext& ctx) {
  const int64_t max_blocks = (static_cast<int64_t>(layers_.size()) + block_size_ - 1) / block_size_;
  blocks_data_ = blocks_.as<float>(max_blocks * ctx.num_tokens * d_);
  num_blocks_ = 0;
}

const float* AttnResStream::AttentionInput(StepContext& ctx, int32_t layer, float*& x) {
  const int64_t T = ctx.num_tokens;
  const float* in = x;
  if (num_blocks_ > 0) {
    float* mixed = mix_.as<float>(T * d_);
    layers_[layer].attention.Mix(ctx, blocks_data_, num_blocks_, x, mixed);
    in = mixed;
  }
  if (layer % block_size_ == 0) {  // a new block: the stream so far is kept, and restarts from zero
    ctx.backend->Copy(blocks_data_ + num_blocks_ * T * d_, x, T * d_);
    ++num_blocks_;
    float* restarted = other_.as<float>(T * d_);
    if (restarted == x) restarted = ctx.buf->x.as<float>(T * d_);  // the buffers alternate
    ctx.backend->SetZero(restarted, T * d_);
    x = restarted;
  }
  return in;
}

const float* AttnResStream::FfnInput(StepContext& ctx, int32_t layer, const float* x) {
  float* mixed = mix_.as<float>(ctx.num_tokens * d_);
  layers_[layer].ffn.Mix(ctx, blocks_data_, num_blocks_, x, mixed);
  return mixed;
}

const float* AttnResStream::Output(StepContext& ctx, const float* x) {
  float* mixed = mix_.as<float>(ctx.num_tokens * d_);
  output_.Mix(ctx, blocks_data_, num_blocks_, x, mixed);
  return mixed;
}

void AttnResStream::ForEachWeight(const WeightFn& fn) {
  auto other = [&](Tensor& t) {
    if (!t.empty()) fn(t, WeightUse::kOther);
  };
  for (LayerMixes& l : layers_) {
    l.attention.ForEachWeight(other);
    l.ffn.ForEachWeight(other);
  }
  output_.ForEachWeight(other);
}

}  // namespace ls
