// MixtralForCausalLM (transformers mixtral): GQA, every layer a softmax top-k MoE whose weights
// are renormalised, experts stored as block_sparse_moe.experts.E.w1 (gate), w3 (up), w2 (down),
// an optional sliding window on every layer.
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {
namespace {

void ReadMixtralConfig(ConfigReader& r, ModelConfig* c) {
  ReadDecoderKeys(r, c, DecoderDefaults{.rms_norm_eps = 1e-5, .max_position_embeddings = 131072});
  ReadGqaKeys(r, c);
  ReadRopeKeys(r, c, RopeDefaults{.theta = 1e6f}, c->attention.head_dim, &c->attention.rope);
  ReadActivation(r, c, /*allow_situ=*/false);
  MoeConfig& m = c->moe;
  m.num_experts = static_cast<int32_t>(r.Int({"num_local_experts", "num_experts"}, false, 8));
  m.top_k = static_cast<int32_t>(r.Int("num_experts_per_tok", false, 2));
  m.expert_ffn = r.Int("intermediate_size", true);
  m.norm_topk_prob = true;
  PlanLayers(c, 0);
  const int64_t window = r.Int("sliding_window", false, 0);
  for (LayerPlan& l : c->layers) l.sliding_window = static_cast<int32_t>(window);
}

}  // namespace

const Family kMixtral = {
    .name = "Mixtral",
    .architectures = {"MixtralForCausalLM"},
    .model_types = {"mixtral"},
    .read_config = ReadMixtralConfig,
    .names = {.moe = {.block = "block_sparse_moe.", .expert = {.gate = "w1", .up = "w3", .down = "w2"}}},
    // No tool_call_format: Mixtral's [TOOL_CALLS] format is not read here.
};

}  // namespace ls
