// Glm4MoeForCausalLM (transformers glm4_moe, GLM-4.5): GQA with q/k/v biases, optional q/k
// norms and partial rotary (half the head by default), dense layers first, then a sigmoid
// router with correction biases and group-limited top-k, scaled weights and shared experts.
// The multi-token-prediction layers after the last decoder layer serve as speculative decoding's
// proposer (--speculative_config method "mtp").
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {
namespace {

void ReadGlm4MoeConfig(ConfigReader& r, ModelConfig* c) {
  ReadDecoderKeys(r, c, DecoderDefaults{.rms_norm_eps = 1e-5, .max_position_embeddings = 131072});
  ReadGqaKeys(r, c);
  GqaConfig& a = c->attention;
  a.qkv_bias = r.Bool("attention_bias", false);
  a.qk_norm = r.Bool("use_qk_norm", false);
  ReadRopeKeys(r, c, RopeDefaults{.partial_rotary_factor = 0.5, .partial_in_default = true}, a.head_dim, &a.rope);
  ReadActivation(r, c, /*allow_situ=*/false);
  ReadDeepseekMoeKeys(r, c, MoeDefaults{});
  ReadNextTokenLayers(r, c);
}

// Tensors of the multi-token-prediction layers (model.layers.L .. L + n - 1), used only for
// speculative decoding.
bool UnusedOk(const std::string& tensor, const ModelConfig& c) { return IsMtpLayerTensor(tensor, c); }

}  // namespace

const Family kGlm4Moe = {
    .name = "GLM-4-MoE",
    .architectures = {"Glm4MoeForCausalLM"},
    .model_types = {"glm4_moe"},
    .read_config = ReadGlm4MoeConfig,
    .unused_ok = UnusedOk,
    .tool_call_format = "glm45",
};

}  // namespace ls
