// GqaAttention: grouped-query attention over the paged KV cache — q/k/v projections (with
// optional biases), optional per-head q/k RMSNorm, RoPE (partial, interleaved or scaled as the
// config says), causal or sliding-window attention, the output projection (optional bias). Under
// tensor parallelism a rank holds its share of the heads (ModelConfig::tensor_parallel): q, k, v
// split by rows, o by columns, its partial output summed over the group.
#pragma once

#include <cstdint>
#include <string>

#include "models/layers/layer.h"
#include "models/layers/rope_table.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_binder.h"

namespace ls {

// The step's activations of the GQA layers.
struct GqaScratch {
  explicit GqaScratch(Backend* b) : q(b), k(b), v(b), out(b) {}
  DeviceBuffer q, k, v;  // [T, H·hd], [T, Hkv·hd], [T, Hkv·hd] projections
  DeviceBuffer out;      // [T, H·hd] the heads' outputs
};

class GqaAttention final : public AttentionLayer {
 public:
  // Binds `<prefix>{q,k,v,o}_proj.{weight,bias}` and `<prefix>{q,k}_norm.weight`.
  GqaAttention(WeightBinder& b, const std::string& prefix, const ModelConfig& config, const LayerPlan& plan);

  KvLayerSpec kv_spec() const override;
  void Forward(StepContext& ctx, int32_t layer, const float* h, float* x) override;
  void ForEachWeight(const WeightFn& fn) override;

 private:
  GqaConfig c_;  // with this rank's head counts
  float eps_;
  int32_t sliding_window_;
  bool tensor_parallel_;  // c_ counts this rank's heads; o's output is a partial sum
  RopeTable rope_;
  Tensor q_, k_, v_, o_;                      // q: [H*hd, d]  k, v: [Hkv*hd, d]  o: [d, H*hd]
  Tensor q_bias_, k_bias_, v_bias_, o_bias_;  // [H*hd] / [Hkv*hd] / [d] where the config has them
  Tensor q_norm_, k_norm_;                    // [hd] (qk_norm)
};

}  // namespace ls
