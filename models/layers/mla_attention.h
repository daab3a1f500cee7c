// MlaAttention: multi-head latent attention (DeepSeek-V2/V3, Kimi) over the paged latent cache.
// Each token caches one normed latent c (kv_lora_rank) and one rope key shared by all heads. The
// absorbed form serves every step: the key up-projection W_UK is folded into the query
// (q_latent_h = W_UK_hᵀ q_nope_h), attention runs over the cached rows, and the value
// up-projection W_UV is applied to the result; no per-head K/V is ever built for cached tokens.
// A prefill-only step may instead expand K/V per head (Expanded), tested equal to the absorbed form.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/layers/layer.h"
#include "models/layers/rope_table.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_binder.h"

namespace ls {

class MlaAttention final : public AttentionLayer {
 public:
  // Binds `<prefix>{q_a_proj,q_a_layernorm,q_b_proj | q_proj}`, `kv_a_proj_with_mqa`,
  // `kv_a_layernorm`, `kv_b_proj`, `o_proj` (biases where the config has them); `rope` is the
  // model's table for config.mla.rope and must outlive the layer.
  MlaAttention(WeightBinder& b, const std::string& prefix, const ModelConfig& config, const RopeTable* rope);

  void Forward(StepContext& ctx, int32_t layer, const float* h, float* x) override;
  void ForEachWeight(const WeightFn& fn) override;
  void WeightsPrepared() override;
  // Values per token in the cache: kv_lora_rank + qk_rope_head_dim.
  int64_t cache_width() const { return c_.kv_lora_rank + c_.qk_rope_head_dim; }

 private:
  MlaConfig c_;
  const RopeTable* rope_;
  int64_t qh_;                   // qk_nope + qk_rope
  Tensor q_a_, q_a_bias_, q_a_norm_, q_b_;  // q_lora: [q_lora, d] / [q_lora] / [q_lora] / [H*qh, q_lora]
  Tensor q_;                                // no q_lora: [H*qh, d]
  Tensor kv_a_c_, kv_a_rope_;               // kv_a_proj_with_mqa's rows: [L, d] and [R, d]
  Tensor kv_a_c_bias_, kv_a_rope_bias_;     // [L], [R] (bias only)
  Tensor kv_a_norm_;                        // [L]
  std::vector<unsigned char> uk_t_bytes_;  // the transposed copies below, as stored, until prepared
  std::vector<Tensor> uk_t_;                // [H] of [L, qk_nope]: q_latent_h = q_nope_h · W_UK_h
  std::vector<Tensor> uv_;                  // [H] of [v, L]: head h's value rows of kv_b_proj
  Tensor g_;                                // [H*v, d] the output gate (output_gate only)
  Tensor o_, o_bias_;                       // [d, H*v], [d]
};

}  // namespace ls
