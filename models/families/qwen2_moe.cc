// Qwen2MoeForCausalLM (transformers qwen2_moe): GQA with q/k/v biases, softmax router (weights
// not renormalised by default), one shared expert scaled by a sigmoid gate, Qwen's
// sparse-layer rule and its sliding-window layer types.
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {
namespace {

void ReadQwen2MoeConfig(ConfigReader& r, ModelConfig* c) {
  ReadDecoderKeys(r, c, DecoderDefaults{.max_position_embeddings = 32768});
  ReadGqaKeys(r, c);
  GqaConfig& a = c->attention;
  a.qkv_bias = r.Bool("qkv_bias", true);
  ReadRopeKeys(r, c, RopeDefaults{}, a.head_dim, &a.rope);
  ReadActivation(r, c, /*allow_situ=*/false);
  c->intermediate_size = r.Int("intermediate_size", false, 0);
  MoeConfig& m = c->moe;
  m.num_experts = static_cast<int32_t>(r.Int({"num_experts", "num_local_experts"}, true));
  m.top_k = static_cast<int32_t>(r.Int("num_experts_per_tok", true));
  m.expert_ffn = r.Int("moe_intermediate_size", true);
  m.shared_ffn = r.Int("shared_expert_intermediate_size", false, 5632);
  m.shared_gate = m.shared_ffn > 0;
  m.norm_topk_prob = r.Bool("norm_topk_prob", false);
  PlanSparseLayers(r, c);
  ReadQwenLayerTypes(r, c, QwenWindowLayers::kAlternateBelowMax);
}

}  // namespace

const Family kQwen2Moe = {
    .name = "Qwen2-MoE",
    .architectures = {"Qwen2MoeForCausalLM"},
    .model_types = {"qwen2_moe"},
    .read_config = ReadQwen2MoeConfig,
    .names = {.moe = {.shared = "shared_expert."}},
    .tool_call_format = "hermes",
};

}  // namespace ls
