// Checkpoint tensor names of the layer library, with the spellings DeepSeek-V3 / Qwen use as
// defaults; a family overrides the ones its checkpoints spell otherwise (Mixtral's w1/w2/w3).
#pragma once

#include <string>

namespace ls {

// A GLU MLP's three projections, each `<name>.weight` under the MLP's prefix.
struct GluNames {
  std::string gate = "gate_proj";
  std::string up = "up_proj";
  std::string down = "down_proj";
};

// Names under a MoE layer's block prefix (e.g. "model.layers.3.mlp.").
struct MoeNames {
  std::string block = "mlp.";
  std::string router = "gate.weight";
  std::string router_bias = "gate.e_score_correction_bias";  // optional in the checkpoint
  std::string experts = "experts.";                         // then "<e>." and the GLU names
  GluNames expert;
  std::string shared = "shared_experts.";
  std::string shared_gate = "shared_expert_gate.weight";
  std::string latent_down = "latent_down_proj.weight";
  std::string latent_norm = "latent_norm.weight";
  std::string latent_up = "latent_up_proj.weight";
};

struct TensorNames {
  std::string prefix;                    // before every name (K3's "language_model.")
  std::string attention = "self_attn.";  // under "model.layers.<i>."
  std::string dense_mlp = "mlp.";
  std::string dense_mlp_alt;             // a second spelling of dense_mlp some writers use (empty: none)
  MoeNames moe;
};

}  // namespace ls
