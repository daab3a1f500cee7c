// StableLatentMoeForCausalLM: this project's own format (docs/formats.md) — GQA attention with
// optional q/k norms, dense GLU layers first, then routed experts in an optional latent space with
// the expert-output norm, frozen router biases and shared experts. A config.json naming no
// architecture and no model_type is read as this format.
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {
namespace {

void ReadStableLatentMoeConfig(ConfigReader& r, ModelConfig* c) {
  ReadDecoderKeys(r, c, DecoderDefaults{});
  ReadGqaKeys(r, c);
  c->attention.qk_norm = r.Bool("qk_norm", false);
  ReadRopeKeys(r, c, RopeDefaults{}, c->attention.head_dim, &c->attention.rope);
  ReadActivation(r, c, /*allow_situ=*/true);
  const int32_t first_dense = static_cast<int32_t>(r.Int("first_k_dense_replace", false, 0));
  if (first_dense < 0 || first_dense > c->num_hidden_layers)
    r.Fail("key 'first_k_dense_replace' must be within [0, num_hidden_layers]");
  c->intermediate_size = r.Int("intermediate_size", false, 0);
  const bool has_moe = first_dense < c->num_hidden_layers;
  MoeConfig& m = c->moe;
  m.num_experts = static_cast<int32_t>(r.Int("n_routed_experts", has_moe));
  m.top_k = static_cast<int32_t>(r.Int("num_experts_per_tok", has_moe));
  m.expert_ffn = r.Int("moe_intermediate_size", has_moe);
  m.latent_size = r.Int("moe_latent_size", false, 0);
  const int64_t shared = r.Int("n_shared_experts", false, 0);
  if (shared < 0) r.Fail("key 'n_shared_experts' must not be negative");
  const int64_t shared_width = r.Int("shared_expert_intermediate_size", false, shared * m.expert_ffn);
  m.shared_ffn = shared > 0 ? shared_width : 0;
  if (shared > 0 && shared_width <= 0) r.Fail("key 'shared_expert_intermediate_size' must be positive");
  const std::string scoring = r.String("scoring_func", "softmax");
  if (scoring == "sigmoid") {
    m.scoring = ScoringFunc::kSigmoid;
  } else if (scoring != "softmax") {
    r.Unsupported("scoring_func", "\"sigmoid\" or \"softmax\"");
  }
  m.norm_topk_prob = r.Bool("norm_topk_prob", true);
  m.routed_scaling_factor = static_cast<float>(r.Number("routed_scaling_factor", false, 1.0));
  m.expert_output_norm = r.Bool("expert_output_norm", false);
  PlanLayers(c, first_dense);
}

}  // namespace

const Family kStableLatentMoe = {
    .name = "StableLatentMoE",
    .architectures = {"StableLatentMoeForCausalLM"},
    .model_types = {"stable_latent_moe"},
    .read_config = ReadStableLatentMoeConfig,
    // The tiny model speaks ChatML, calling tools as Qwen does.
    .tool_call_format = "hermes",
};

}  // namespace ls
