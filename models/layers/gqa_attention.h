// GqaAttention: grouped-query attention over the paged KV cache — q/k/v projections (with
// optional biases), optional per-head q/k RMSNorm, RoPE (partial, interleaved or scaled as the
// config says), causal or sliding-window attention, the output projection (optional bias).
#pragma once

#include <cstdint>
#include <string>

#include "models/layers/layer.h"
#include "models/layers/rope_table.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_binder.h"

namespace ls {

class GqaAttention final : public AttentionLayer {
 public:
  // Binds `<prefix>{q,k,v,o}_proj.{weight,bias}` and `<prefix>{q,k}_norm.weight`; `rope` is
  // the model's table for config.rope and must outlive the layer.
  GqaAttention(WeightBinder& b, const std::string& prefix, const ModelConfig& config, const LayerPlan& plan,
               const RopeTable* rope);

  void Forward(StepContext& ctx, int32_t layer, const float* h, float* x) override;
  void ForEachWeight(const WeightFn& fn) override;

 private:
  GqaConfig c_;
  float eps_;
  int32_t sliding_window_;
  const RopeTable* rope_;
  Tensor q_, k_, v_, o_;                      // q: [H*hd, d]  k, v: [Hkv*hd, d]  o: [d, H*hd]
  Tensor q_bias_, k_bias_, v_bias_, o_bias_;  // [H*hd] / [Hkv*hd] / [d] where the config has them
  Tensor q_norm_, k_norm_;                    // [hd] (qk_norm)
};

}  // namespace ls
