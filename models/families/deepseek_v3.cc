// DeepseekV3ForCausalLM (transformers deepseek_v3; DeepSeek-V3/R1, and Kimi-K2 in kimi_k2.cc): MLA
// attention (interleaved RoPE on the rope dims, YaRN's mscale² on the softmax scale) on every
// layer, dense layers first, then a sigmoid router with correction biases and group-limited
// top-k, scaled weights and shared experts. The multi-token-prediction layers after the last
// decoder layer serve as speculative decoding's proposer (--speculative_config method "mtp").
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {

void ReadDeepseekV3Config(ConfigReader& r, ModelConfig* c) {
  ReadDecoderKeys(r, c, DecoderDefaults{.max_position_embeddings = 4096});
  ReadActivation(r, c, /*allow_situ=*/false);
  ReadDeepseekMoeKeys(r, c, MoeDefaults{.n_group = 8, .topk_group = 4, .routed_scaling_factor = 2.5,
                                        .first_k_dense_replace = 3});
  ReadMlaKeys(r, c, MlaDefaults{.q_lora_rank = 1536});
  for (LayerPlan& l : c->layers) l.attention = AttentionKind::kMla;
  // What the published configs say about the router, which transformers implements one way only.
  if (r.String("scoring_func", "sigmoid") != "sigmoid") r.Unsupported("scoring_func", "\"sigmoid\"");
  if (r.String("topk_method", "noaux_tc") != "noaux_tc") r.Unsupported("topk_method", "\"noaux_tc\"");
  if (r.Int("moe_layer_freq", false, 1) != 1) r.Unsupported("moe_layer_freq", "1: every layer after the dense ones");
  ReadNextTokenLayers(r, c);
  r.Ignore({"ep_size", "aux_loss_alpha", "seq_aux"});
}

const Family kDeepseekV3 = {
    .name = "DeepSeek-V3",
    .architectures = {"DeepseekV3ForCausalLM"},
    .model_types = {"deepseek_v3"},
    .read_config = ReadDeepseekV3Config,
    .unused_ok = IsMtpLayerTensor,
    .tool_call_format = "deepseek_v3",
};

}  // namespace ls
