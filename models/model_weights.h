// ModelWeights: every tensor of a Stable LatentMoE checkpoint, bound by role and shape-checked
// against the ModelConfig (DESIGN.md §2 names). Views into a WeightStore, which must outlive it.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/device_buffer.h"
#include "kernels/tensor.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_store.h"

namespace ls {

struct GluWeights {
  Tensor gate;  // [f, in]
  Tensor up;    // [f, in]
  Tensor down;  // [out, f]
};

struct LayerWeights {
  Tensor input_norm;   // [d]
  Tensor q, k, v, o;   // q: [H*hd, d]  k, v: [Hkv*hd, d]  o: [d, H*hd]
  Tensor q_norm, k_norm;  // [hd] (qk_norm only)
  Tensor post_attention_norm;  // [d]

  bool is_moe = false;
  GluWeights dense;  // dense layers: [intermediate, d] / [d, intermediate]

  Tensor router;                  // [N, d]
  std::vector<float> router_bias;  // [N] frozen selection bias (zeros when absent), host float32
  Tensor router_bias_view;         // router_bias as the backend's Router reads it (PrepareModelWeights)
  Tensor latent_down;             // [d_lat, d] (latent only)
  std::vector<Tensor> expert_gate, expert_up, expert_down;  // N of [f, w] / [f, w] / [w, f]
  Tensor latent_norm;             // [w] (expert_output_norm only)
  Tensor latent_up;               // [d, d_lat] (latent only)
  bool has_shared = false;
  GluWeights shared;              // [fs, d] / [d, fs]
};

struct ModelWeights {
  Tensor embed;  // [V, d]
  std::vector<LayerWeights> layers;
  Tensor final_norm;  // [d]
  Tensor lm_head;     // [V, d] (the embedding when tied)
};

// Binds every tensor; an absent router bias means zeros. Errors name the tensor and file.
absl::StatusOr<ModelWeights> BindModelWeights(const ModelConfig& config, const WeightStore& store);

// The weights as `backend`'s ops read them: every tensor through Backend::PrepareWeight (GEMM
// weights for WeightUse::kMatmul, the rest kOther), stored in `storage`, which must outlive the
// result, as must `host` where the backend reads tensors in place.
// `copied` (optional) receives the host tensors the backend made copies of.
ModelWeights PrepareModelWeights(const ModelWeights& host, Backend* backend, DeviceBuffer* storage,
                                 std::vector<Tensor>* copied = nullptr);

// Points layer.router_bias_view at the current router_bias: re-pointed when the backend reads it
// in place, else copied into the backend memory the view already holds.
void UpdateRouterBiasView(LayerWeights& layer, Backend* backend);

}  // namespace ls
