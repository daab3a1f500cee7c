// Qwen3MoeForCausalLM (transformers qwen3_moe): GQA with per-head q/k RMSNorm, softmax router,
// dense layers where `mlp_only_layers` or `decoder_sparse_step` say so, an optional sliding
// window on every layer.
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {
namespace {

void ReadQwen3MoeConfig(ConfigReader& r, ModelConfig* c) {
  ReadQwen3AttentionKeys(r, c);
  c->intermediate_size = r.Int("intermediate_size", false, 0);
  MoeConfig& m = c->moe;
  m.num_experts = static_cast<int32_t>(r.Int({"num_experts", "num_local_experts"}, true));
  m.top_k = static_cast<int32_t>(r.Int("num_experts_per_tok", true));
  m.expert_ffn = r.Int("moe_intermediate_size", true);
  m.norm_topk_prob = r.Bool("norm_topk_prob", false);
  PlanSparseLayers(r, c);
  // transformers applies the window to every layer when use_sliding_window is set.
  const bool sliding = r.Bool("use_sliding_window", false);
  const int64_t window = r.Int("sliding_window", false, 4096);
  r.Ignore({"max_window_layers"});
  if (sliding)
    for (LayerPlan& l : c->layers) l.sliding_window = static_cast<int32_t>(window);
}

}  // namespace

const Family kQwen3Moe = {
    .name = "Qwen3-MoE",
    .architectures = {"Qwen3MoeForCausalLM"},
    .model_types = {"qwen3_moe"},
    .read_config = ReadQwen3MoeConfig,
    .tool_call_format = "hermes",
};

}  // namespace ls
