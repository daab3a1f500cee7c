// The config.json keys several families spell the same way, read for the family adapters:
// decoder sizes and token ids, GQA attention sizes, RoPE (legacy `rope_theta`/`rope_scaling` or
// transformers 5 `rope_parameters`), the GLU activation, and the bookkeeping keys every
// transformers config carries that do not change the math.
#pragma once

#include <cstdint>
#include <string>

#include "models/loader/config_reader.h"
#include "models/loader/model_config.h"

namespace ls {

// What a family's transformers config class assumes for keys config.json leaves out.
struct DecoderDefaults {
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 4096;
};
// vocab_size, hidden_size, num_hidden_layers, rms_norm_eps, tie_word_embeddings (default false,
// as every family's config class), max_position_embeddings, torch_dtype/dtype, bos/eos ids;
// declares the common bookkeeping keys irrelevant.
void ReadDecoderKeys(ConfigReader& r, ModelConfig* c, const DecoderDefaults& defaults);
// num_attention_heads, num_key_value_heads (default H), head_dim (default d / H).
void ReadGqaKeys(ConfigReader& r, ModelConfig* c);
// What a family's transformers config class assumes when config.json says nothing.
struct RopeDefaults {
  float theta = 10000.f;
  double partial_rotary_factor = 1.0;
  // Whether the family's unscaled RoPE honours partial_rotary_factor (GLM's does; in transformers
  // the others rotate the whole head unless a scaling type is set).
  bool partial_in_default = false;
};
// The RoPE of an attention layer over `head_dim` dims: theta, the partial rotary factor and the
// scaling type; unsupported types are an error naming key and value.
void ReadRopeKeys(ConfigReader& r, ModelConfig* c, const RopeDefaults& defaults, int32_t head_dim, RopeConfig* rope);
// hidden_act: "silu", or also "situ" (with activation_situ_beta and activation_situ_linear_beta)
// where the family allows it.
void ReadActivation(ConfigReader& r, ModelConfig* c, bool allow_situ);
// One plan per layer: layers [0, first_dense) dense, the rest MoE.
void PlanLayers(ModelConfig* c, int32_t first_dense);
// Qwen's sparse-layer rule: layer l is MoE unless listed in `mlp_only_layers`, when there are
// experts and (l + 1) is a multiple of `decoder_sparse_step`.
void PlanSparseLayers(ConfigReader& r, ModelConfig* c);
// Which layers slide when config.json lists no `layer_types`, as transformers decides it.
enum class QwenWindowLayers {
  kAlternateBelowMax,  // Qwen2-MoE: every other layer (0, 2, 4, ...) below max_window_layers
  kFromMax,            // Qwen3 (dense): the layers from max_window_layers on
};
// Qwen's sliding-window layers: `layer_types` when given, else `rule`; a window only with
// use_sliding_window, when sliding_window must then be positive.
void ReadQwenLayerTypes(ConfigReader& r, ModelConfig* c, QwenWindowLayers rule);
// Qwen3's decoder and attention keys, dense and MoE: the decoder keys (max_position_embeddings
// default 32768), GQA with per-head q/k RMSNorm, attention_bias, RoPE, the activation.
void ReadQwen3AttentionKeys(ConfigReader& r, ModelConfig* c);
// What a DeepSeek-style family's config class assumes for MoE keys config.json leaves out.
struct MoeDefaults {
  int64_t n_shared_experts = 1;
  int32_t n_group = 1, topk_group = 1;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  int64_t first_k_dense_replace = 1;
};
// DeepSeek-style MoE keys (GLM-4-MoE, DeepSeek-V2/V3, Kimi), with Kimi's spellings as aliases:
// n_routed_experts (num_local_experts, num_experts), num_experts_per_tok (num_experts_per_token),
// moe_intermediate_size, n_shared_experts (num_shared_experts), first_k_dense_replace,
// intermediate_size, n_group (num_expert_group), topk_group, norm_topk_prob (moe_renormalize),
// routed_scaling_factor; a sigmoid router. Plans the layers (dense first, then MoE).
void ReadDeepseekMoeKeys(ConfigReader& r, ModelConfig* c, const MoeDefaults& defaults);
// What a family's config class assumes for MLA keys config.json leaves out.
struct MlaDefaults {
  int64_t q_lora_rank = 0;  // 0: none
  bool rope = true;         // false: no RoPE at all (Kimi), and no RoPE keys read
};
// MLA keys: num_attention_heads (num_key_value_heads must equal it), q_lora_rank (null: none),
// kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, attention_bias, and with RoPE the
// RoPE keys over qk_rope_head_dim, rope_interleave (default true) and YaRN's mscale² on the
// softmax scale.
void ReadMlaKeys(ConfigReader& r, ModelConfig* c, const MlaDefaults& defaults);
// Kimi's layer kinds (Kimi-Linear, K3): `layer_types` when given, else linear_attn_config's
// 1-based kda_layers / full_attn_layers (the rest KDA), else every fourth layer MLA; the KDA sizes
// from linear_attn_config (num_heads, head_dim, short_conv_kernel_size) or transformers'
// linear_num_heads / linear_head_dim / linear_conv_kernel_dim; `mlp_layer_types` (dense or sparse
// per layer) when given overrides first_k_dense_replace.
void ReadKimiLayerKinds(ConfigReader& r, ModelConfig* c);
// The keys Kimi-Linear and K3 share: the decoder keys (rms_norm_eps 1e-5, 4,096 positions), an
// untied head, DeepSeek-V3's MoE keys in Kimi's spellings with a sigmoid router, MLA without RoPE,
// every layer after the dense ones MoE, and the layer kinds; the RoPE keys are present and unused.
void ReadKimiKeys(ConfigReader& r, ModelConfig* c, const MoeDefaults& moe);
// Whether a tensor lies in a layer past the decoder's last (model.layers.N with N >=
// num_hidden_layers): the multi-token-prediction layers some checkpoints carry for speculative
// decoding, which transformers skips on load too.
bool IsMtpLayerTensor(const std::string& tensor, const ModelConfig& c);
// num_nextn_predict_layers (or num_mtp_layers): the checkpoint's multi-token-prediction layers.
void ReadNextTokenLayers(ConfigReader& r, ModelConfig* c);

}  // namespace ls
