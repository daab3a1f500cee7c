// MoeBlock: the MoE feed-forward of a decoder layer (docs/math.md) — router (softmax or sigmoid,
// frozen selection biases, group-limited top-k), optional latent down-projection, the routed GLU
// experts run grouped (or dispatched over an expert placement), optional RMSNorm on their sum,
// optional latent up-projection, and shared experts (optionally scaled by a sigmoid gate).
// Owns views of its weights and its router biases, which calibration may replace. Under tensor
// parallelism each rank of the group routes its own slice of the step's tokens (the router and
// latent projections whole on every rank), holds a share of the shared experts' width, and the
// group sums the parts once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/layers/glu_mlp.h"
#include "models/layers/layer.h"
#include "models/layers/tensor_names.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_binder.h"
#include "models/placed_experts.h"

namespace ls {

class MoeBlock final : public FfnLayer {
 public:
  // `prefix` is the block's ("model.layers.3.mlp.").
  MoeBlock(WeightBinder& b, const std::string& prefix, const ModelConfig& config, const MoeNames& names);

  void Forward(StepContext& ctx, int32_t layer, const float* h, float* x) override;
  void ForEachWeight(const WeightFn& fn) override;

  const ExpertWeights& experts() const { return experts_; }
  // The frozen selection biases [N] (zeros where the checkpoint has none).
  const std::vector<float>& router_bias() const { return router_bias_; }
  const std::string& router_bias_name() const { return router_bias_name_; }
  // Replaces them; the backend's copy follows.
  void SetRouterBias(std::vector<float> bias, Backend* backend);

 private:
  // Routed experts over the placed devices: dispatch (to the ranks holding the rows' slots),
  // each rank's compute over its slots, combine. out: [T, w].
  void PlacedExperts(StepContext& ctx, const PlacedLayer& pl, int32_t layer, const float* z, const int32_t* topk_ids,
                     const float* weights, float* out, int64_t* tokens_per_expert);

  MoeConfig m_;
  GluAct act_;
  float eps_;
  int64_t width_;                   // the experts' input and output width (d_lat or d)
  TensorParallel tensor_parallel_;
  Tensor router_;                   // [N, d]
  std::vector<float> router_bias_;  // [N] host float32
  std::string router_bias_name_;    // its checkpoint tensor name
  Tensor router_bias_view_;         // router_bias_ as the backend's Router reads it
  Tensor latent_down_, latent_up_;  // [d_lat, d] / [d, d_lat] (latent only)
  Tensor latent_norm_;              // [w] (expert_output_norm only)
  ExpertWeights experts_;           // N of [f, w] / [f, w] / [w, f]
  std::unique_ptr<GluMlp> shared_;  // [fs, d] / [d, fs]
  Tensor shared_gate_;              // [1, d] (shared_gate only)
};

}  // namespace ls
