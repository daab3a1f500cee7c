// KimiLinearForCausalLM (transformers kimi_linear, Kimi-Linear-48B-A3B): KDA layers (softplus
// forget gate, low-rank output gate) interleaved with MLA layers without RoPE, as
// linear_attn_config lists them (1-based), dense layers first, then a sigmoid router with
// correction biases and shared experts; experts as block_sparse_moe.experts.E.w1/w2/w3.
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {
namespace {

void ReadConfig(ConfigReader& r, ModelConfig* c) {
  ReadDecoderKeys(r, c, DecoderDefaults{.rms_norm_eps = 1e-5, .max_position_embeddings = 4096});
  // transformers' Kimi-Linear never ties its head: with no lm_head.weight it would run a random one.
  if (c->tie_word_embeddings) r.Unsupported("tie_word_embeddings", "false: Kimi-Linear keeps its own head");
  ReadActivation(r, c, /*allow_situ=*/false);
  ReadDeepseekMoeKeys(r, c, MoeDefaults{.routed_scaling_factor = 2.446});
  ReadMlaKeys(r, c, MlaDefaults{.q_lora_rank = 0, .rope = false});
  r.Ignore({"rope_theta", "rope_scaling", "rope_parameters", "num_nextn_predict_layers", "use_grouped_topk"});
  if (r.String("moe_router_activation_func", "sigmoid") != "sigmoid")
    r.Unsupported("moe_router_activation_func", "\"sigmoid\"");
  if (!r.Bool("mla_use_nope", true)) r.Unsupported("mla_use_nope", "true: the MLA layers apply no RoPE");
  if (r.Int("moe_layer_freq", false, 1) != 1) r.Unsupported("moe_layer_freq", "1: every layer after the dense ones");
  ReadKimiLayerKinds(r, c);
  c->kda.gate = KdaGate::kSoftplus;
  c->kda.full_rank_output_gate = false;
}

}  // namespace

const Family kKimiLinear = {
    .name = "Kimi-Linear",
    .architectures = {"KimiLinearForCausalLM"},
    .model_types = {"kimi_linear"},
    .read_config = ReadConfig,
    // transformers 5 saves the dense layers' MLP under the MoE block's name.
    .names = {.dense_mlp_alt = "block_sparse_moe.",
              .moe = {.block = "block_sparse_moe.", .expert = {.gate = "w1", .up = "w3", .down = "w2"}}},
};

}  // namespace ls
