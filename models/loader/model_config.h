// ModelConfig: the architecture and sizes of a model as the layers read them, filled from a
// config.json by its family's adapter (models/families/) and validated here. A per-layer plan
// says which attention and FFN each decoder layer uses. Errors name the file and the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/ops.h"
#include "kernels/quantized_weight.h"
#include "models/loader/quantization_config.h"

namespace ls {

// Rotary position embedding of an attention layer (the scaling types of transformers'
// modeling_rope_utils that the server implements; see models/layers/rope_table.h for the math).
struct RopeConfig {
  enum class Scaling : uint8_t { kNone, kLinear, kYarn, kLlama3 };
  float theta = 10000.f;
  int32_t rotary_dim = 0;    // leading dims of a head that rotate (partial rotary); 0 = no RoPE
  bool interleaved = false;  // pairs (2i, 2i + 1) instead of rotate-half pairs (i, i + rotary_dim / 2)
  Scaling scaling = Scaling::kNone;
  float factor = 1.f;                            // linear, yarn, llama3
  int64_t original_max_position_embeddings = 0;  // yarn, llama3
  float beta_fast = 32.f, beta_slow = 1.f;       // yarn
  float mscale = 0.f, mscale_all_dim = 0.f;      // yarn (0: unset)
  float attention_factor = 0.f;                  // yarn (0: derived from factor and mscale)
  bool truncate = true;                          // yarn
  float low_freq_factor = 1.f, high_freq_factor = 4.f;  // llama3
};

enum class AttentionKind : uint8_t { kGqa, kMla, kKda };
enum class FfnKind : uint8_t { kDense, kMoe };

// What one decoder layer runs.
struct LayerPlan {
  AttentionKind attention = AttentionKind::kGqa;
  FfnKind ffn = FfnKind::kDense;
  int32_t sliding_window = 0;  // a token attends to the last `sliding_window` positions (0: all)
};

// A process's place in a tensor-parallel group of `size` ranks: it holds part `rank` of every
// weight tensor parallelism splits, and the group's ranks run the same tokens, summing their
// parts' results (Backend::AllReduceSum). size 1: the whole model.
struct TensorParallel {
  int32_t rank = 0;
  int32_t size = 1;
  bool on() const { return size > 1; }
};

// Grouped-query attention (query head h reads KV head h·Hkv/H), scale 1/√head_dim.
struct GqaConfig {
  int32_t num_heads = 0;     // H
  int32_t num_kv_heads = 0;  // Hkv, divides H
  int32_t head_dim = 0;      // hd
  bool qkv_bias = false;     // q, k and v projections carry biases
  bool o_bias = false;       // the output projection carries a bias
  bool qk_norm = false;      // RMSNorm over each head of q and k before RoPE
  RopeConfig rope;
};

// Multi-head latent attention (DeepSeek-V2/V3, Kimi): q from the hidden state (optionally
// through a LoRA with its norm), one latent c (kv_lora_rank) and one rope key per token, cached,
// from which kv_b_proj expands per-head keys (qk_nope) and values (v_head_dim).
struct MlaConfig {
  int32_t num_heads = 0;         // H
  int64_t q_lora_rank = 0;       // 0: q_proj straight from the hidden state
  int64_t kv_lora_rank = 0;      // L, the cached latent width
  int32_t qk_nope_head_dim = 0;
  int32_t qk_rope_head_dim = 0;  // R: the rope key shared by all heads, cached beside the latent
  int32_t v_head_dim = 0;
  bool bias = false;             // q_a_proj (or nothing), kv_a_proj_with_mqa and o_proj carry biases
  bool use_rope = true;          // false: the rope dims are not rotated (Kimi)
  bool output_gate = false;      // K3: the heads' output times σ(g_proj(x)) before o_proj
  float norm_eps = 1e-6f;        // q_a_layernorm and kv_a_layernorm
  float softmax_scale = 0.f;     // (qk_nope + qk_rope)^-1/2, times YaRN's mscale² where the config asks
  RopeConfig rope;               // over qk_rope_head_dim dims
};

// Kimi Delta Attention (Kimi-Linear, K3): linear attention with a per-sequence recurrent state of
// [head_dim, head_dim] per head plus the short convolutions' last inputs, no per-token cache.
struct KdaConfig {
  int32_t num_heads = 0;
  int32_t head_dim = 0;             // of keys and values alike
  int32_t conv_kernel = 4;          // short_conv_kernel_size
  KdaGate gate = KdaGate::kSoftplus;
  float gate_lower_bound = 0.f;     // KdaGate::kBoundedSigmoid (K3)
  bool full_rank_output_gate = false;  // g_proj [H·d, d] (K3), else g_a_proj/g_b_proj (Kimi-Linear)
  // Values of recurrent state per sequence: S [H, d, d], then the q, k and v convolutions'
  // [conv_kernel − 1, H·d] last inputs each.
  int64_t state_floats() const {
    const int64_t width = static_cast<int64_t>(num_heads) * head_dim;
    return width * head_dim + 3 * (conv_kernel - 1) * width;
  }
};

// Routed experts (docs/math.md), optionally in a latent space, with shared experts.
struct MoeConfig {
  int32_t num_experts = 0;     // N
  int32_t top_k = 0;           // K
  int64_t expert_ffn = 0;      // f, each routed expert's GLU width
  int64_t latent_size = 0;     // d_lat; 0 = the experts read and write the hidden state (plain MoE)
  int64_t shared_ffn = 0;      // width of the merged shared-expert GLU; 0 = none
  bool shared_gate = false;    // the shared experts' output is scaled by σ(h·w_gate) (Qwen2-MoE)
  ScoringFunc scoring = ScoringFunc::kSoftmax;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.f;
  int32_t n_group = 1;         // group-limited top-k: experts in n_group groups ...
  int32_t topk_group = 1;      // ... of which the topk_group best are eligible, ranked by
  GroupScore group_score = GroupScore::kTop2Sum;  // ... the sum of their top-2 s + b, or their best
  bool expert_output_norm = false;  // RMSNorm on the combined latent expert output
};

struct ModelConfig {
  std::string architecture;  // config.json architectures[0]
  std::string model_type;
  std::string family;        // the implementation serving it (models/families/)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;  // d
  int32_t num_hidden_layers = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;
  GluAct hidden_act = Activation::kSiLU;  // the dense FFN's and the experts' GLU gate
  int64_t intermediate_size = 0;              // dense FFN width
  // Attention residuals (K3): the residual stream restarts every attn_res_block_size layers and
  // each sublayer reads a learned mix of the block residuals; 0: the plain residual stream.
  int32_t attn_res_block_size = 0;

  GqaConfig attention;  // the GQA layers'
  MlaConfig mla;        // the MLA layers'
  KdaConfig kda;        // the KDA layers'
  MoeConfig moe;
  std::vector<LayerPlan> layers;  // [num_hidden_layers]

  // How the checkpoint stores its weights (config.json quantization_config), and the online
  // quantization the server applies to a float checkpoint at load (--quantization).
  QuantizationConfig quantization;
  QuantScheme online_quantization = QuantScheme::kNone;

  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;
  // Keys the adapter neither read nor knows to be irrelevant; the server logs them.
  std::vector<std::string> unrecognized_keys;
  // Set by the loader's options, not config.json: the routed experts stay in host memory (the
  // mapped checkpoint) and are prepared only into the slots an expert placement gives this process
  // (a rank of a group, which holds only its own devices' experts).
  bool routed_experts_on_host = false;
  // Multi-token-prediction layers after the last decoder layer (model.layers.{num_hidden_layers}
  // on, config num_nextn_predict_layers: DeepSeek-V3, GLM-4-MoE), read only by speculative
  // decoding. Set by the loader's options: this model is the first of them alone (its layer 0 is
  // the checkpoint's layer next_token_layer), reading the target's hidden rows; -1: a plain model.
  int32_t num_nextn_predict_layers = 0;
  int32_t next_token_layer = -1;
  // Set by the loader's options: this process's part of a tensor-parallel group
  // (docs/rank-groups.md, "Tensor parallelism"): its attention heads, dense and shared-expert widths and
  // vocabulary rows.
  TensorParallel tensor_parallel;
  // Set by the loader's options: only the checkpoint's shapes were read; no step can run.
  bool shapes_only = false;

  // Width the routed experts read and write: d_lat with a latent projection, else d.
  int64_t expert_width() const { return moe.latent_size > 0 ? moe.latent_size : hidden_size; }
  bool is_moe_layer(int32_t layer) const { return layers[layer].ffn == FfnKind::kMoe; }
  bool has_moe_layers() const;
  bool has_attention(AttentionKind kind) const;
};

// Checks sizes the adapter read for consistency; errors name the key and `source`.
absl::Status ValidateModelConfig(const ModelConfig& c, absl::string_view source);

}  // namespace ls
