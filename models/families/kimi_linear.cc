// KimiLinearForCausalLM (transformers kimi_linear, Kimi-Linear-48B-A3B): KDA layers (softplus
// forget gate, low-rank output gate) interleaved with MLA layers without RoPE, as
// linear_attn_config lists them (1-based), dense layers first, then a sigmoid router with
// correction biases and shared experts; experts as block_sparse_moe.experts.E.w1/w2/w3.
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {
namespace {

void ReadKimiLinearConfig(ConfigReader& r, ModelConfig* c) {
  ReadKimiKeys(r, c, MoeDefaults{.routed_scaling_factor = 2.446});
  ReadActivation(r, c, /*allow_situ=*/false);
  r.Ignore({"use_grouped_topk"});
  // transformers' Kimi-Linear has one gate of each kind, whatever linear_attn_config says.
  c->kda.gate = KdaGate::kSoftplus;
  c->kda.full_rank_output_gate = false;
}

}  // namespace

const Family kKimiLinear = {
    .name = "Kimi-Linear",
    .architectures = {"KimiLinearForCausalLM"},
    .model_types = {"kimi_linear"},
    .read_config = ReadKimiLinearConfig,
    // transformers 5 saves the dense layers' MLP under the MoE block's name.
    .names = {.dense_mlp_alt = "block_sparse_moe.",
              .moe = {.block = "block_sparse_moe.", .expert = {.gate = "w1", .up = "w3", .down = "w2"}}},
    .tool_call_format = "kimi_k2",
};

}  // namespace ls
