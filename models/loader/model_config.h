// ModelConfig: the architecture and sizes of a model, read from its config.json and validated
// (DESIGN.md §2). Missing required keys and inconsistent sizes are errors naming the key.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/ops.h"

namespace ls {

struct ModelConfig {
  std::string architecture;  // "StableLatentMoeForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;  // d
  int32_t num_hidden_layers = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;

  int32_t num_attention_heads = 0;   // H
  int32_t num_key_value_heads = 0;   // Hkv, divides H
  int32_t head_dim = 0;              // hd, even (RoPE pairs i and i + hd/2)
  float rope_theta = 10000.f;
  int64_t max_position_embeddings = 0;
  bool qk_norm = false;

  int32_t first_k_dense_replace = 0;  // layers [0, k) use a dense GLU FFN
  int64_t intermediate_size = 0;      // dense FFN width

  int32_t n_routed_experts = 0;       // N
  int32_t num_experts_per_tok = 0;    // K
  int64_t moe_intermediate_size = 0;  // f
  int64_t moe_latent_size = 0;        // d_lat; 0 = no latent projection (plain MoE)
  int32_t n_shared_experts = 0;
  int64_t shared_expert_intermediate_size = 0;
  Activation hidden_act = Activation::kSiLU;
  ScoringFunc scoring_func = ScoringFunc::kSoftmax;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.f;
  bool expert_output_norm = false;

  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;

  // Width the routed experts read and write: d_lat with a latent projection, else d.
  int64_t expert_width() const { return moe_latent_size > 0 ? moe_latent_size : hidden_size; }
  bool is_moe_layer(int32_t layer) const { return layer >= first_k_dense_replace; }
};

// Parses config.json text; `source` (a file path) prefixes every error message.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text, absl::string_view source);
// Reads and parses DIR/config.json.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);

}  // namespace ls
