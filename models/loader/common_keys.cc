// Shared config.json key groups of the family adapters.
#include "models/loader/common_keys.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace ls {

void ReadDecoderKeys(ConfigReader& r, ModelConfig* c, const DecoderDefaults& defaults) {
  c->vocab_size = r.Int("vocab_size", true);
  c->hidden_size = r.Int("hidden_size", true);
  // Bounded before any per-layer plan is allocated from it (the largest published models have ~100).
  constexpr int64_t kMaxLayers = 4096;
  const int64_t layers = r.Int("num_hidden_layers", true);
  if (layers > kMaxLayers) r.Fail(absl::StrCat("key 'num_hidden_layers' is ", layers, "; at most ", kMaxLayers));
  c->num_hidden_layers = static_cast<int32_t>(std::min(layers, kMaxLayers));
  c->rms_norm_eps = static_cast<float>(r.Number({"rms_norm_eps"}, false, defaults.rms_norm_eps));
  c->tie_word_embeddings = r.Bool("tie_word_embeddings", false);
  c->max_position_embeddings =
      r.Int({"max_position_embeddings", "model_max_length"}, false, defaults.max_position_embeddings);
  // The checkpoint's own floating-point type decides how weights are read; the declared one must
  // be one the loader reads.
  for (const char* key : {"torch_dtype", "dtype"}) {
    const std::string dtype = r.String(key, "float32");
    if (dtype != "float32" && dtype != "bfloat16" && dtype != "float16")
      r.Unsupported(key, "float32, bfloat16 or float16 weights");
  }
  c->bos_token_id = static_cast<int32_t>(r.Int("bos_token_id", false, -1));
  for (int64_t id : r.IntList("eos_token_id")) c->eos_token_ids.push_back(static_cast<int32_t>(id));
  // Bookkeeping, training-only and generation keys of transformers configs.
  r.Ignore({"architectures", "model_type", "transformers_version", "_name_or_path", "auto_map", "initializer_range",
            "use_cache", "attention_dropout", "hidden_dropout", "output_router_logits", "router_aux_loss_coef",
            "router_z_loss_coef", "router_jitter_noise", "pad_token_id", "return_dict", "output_hidden_states",
            "output_attentions", "use_return_dict", "id2label", "label2id", "problem_type", "tokenizer_class",
            "is_encoder_decoder", "is_decoder", "add_cross_attention", "chunk_size_feed_forward",
            "task_specific_params", "prefix", "pretraining_tp", "max_length", "min_length", "do_sample",
            "temperature", "top_p", "top_k", "num_beams", "repetition_penalty", "use_bfloat16", "bad_words_ids",
            "decoder_start_token_id", "sep_token_id", "tf_legacy_loss", "torchscript", "pruned_heads",
            "cross_attention_hidden_size", "finetuning_task"});
}

void ReadGqaKeys(ConfigReader& r, ModelConfig* c) {
  GqaConfig& a = c->attention;
  a.num_heads = static_cast<int32_t>(r.Int("num_attention_heads", true));
  a.num_kv_heads = static_cast<int32_t>(r.Int("num_key_value_heads", false, a.num_heads));
  a.head_dim = static_cast<int32_t>(r.Int("head_dim", false, a.num_heads > 0 ? c->hidden_size / a.num_heads : 0));
}

namespace {

// The scaling keys of one rope dict (legacy rope_scaling or rope_parameters); `type_key` is the
// key the type was read from ("rope_type" or the legacy "type").
void ReadScaling(ConfigReader& p, const std::string& type, const char* type_key, RopeConfig* rope) {
  if (type == "default") return;
  if (type == "linear") {
    rope->scaling = RopeConfig::Scaling::kLinear;
    rope->factor = static_cast<float>(p.Number("factor", true, 1.0));
  } else if (type == "yarn") {
    rope->scaling = RopeConfig::Scaling::kYarn;
    rope->factor = static_cast<float>(p.Number("factor", true, 1.0));
    rope->original_max_position_embeddings = p.Int("original_max_position_embeddings", false, 0);
    rope->beta_fast = static_cast<float>(p.Number("beta_fast", false, 32.0));
    rope->beta_slow = static_cast<float>(p.Number("beta_slow", false, 1.0));
    rope->mscale = static_cast<float>(p.Number("mscale", false, 0.0));
    rope->mscale_all_dim = static_cast<float>(p.Number("mscale_all_dim", false, 0.0));
    rope->attention_factor = static_cast<float>(p.Number("attention_factor", false, 0.0));
    rope->truncate = p.Bool("truncate", true);
  } else if (type == "llama3") {
    rope->scaling = RopeConfig::Scaling::kLlama3;
    rope->factor = static_cast<float>(p.Number("factor", true, 1.0));
    rope->original_max_position_embeddings = p.Int("original_max_position_embeddings", false, 0);
    rope->low_freq_factor = static_cast<float>(p.Number("low_freq_factor", true, 1.0));
    rope->high_freq_factor = static_cast<float>(p.Number("high_freq_factor", true, 4.0));
  } else if (type == "dynamic") {
    p.Fail(absl::StrCat("key '", p.Path(type_key),
                        "' = \"dynamic\" is not supported: its frequencies change with the length of each forward "
                        "call, which continuous batching and chunked prefill cannot reproduce (supported: default, "
                        "linear, yarn, llama3)"));
  } else {
    p.Fail(absl::StrCat("key '", p.Path(type_key), "' = \"", type,
                        "\" is not supported (supported: default, linear, yarn, llama3)"));
  }
  if (!(rope->factor > 0.f)) p.Fail(absl::StrCat("key '", p.Path("factor"), "' must be positive"));
}

}  // namespace

void ReadRopeKeys(ConfigReader& r, ModelConfig* c, const RopeDefaults& defaults, int32_t head_dim,
                  RopeConfig* rope) {
  bool partial_default_path = true;  // no scaling type: transformers' family default RoPE
  rope->theta = static_cast<float>(r.Number("rope_theta", false, defaults.theta));
  double partial = r.Number("partial_rotary_factor", false, defaults.partial_rotary_factor);
  // transformers 5 writes rope_parameters, earlier checkpoints rope_scaling (null: no scaling);
  // where both are present, rope_scaling wins, as transformers reads them.
  std::optional<ConfigReader> params = r.Object("rope_scaling");
  if (!params) params = r.Object("rope_parameters");
  if (params) {
    ConfigReader& p = *params;
    rope->theta = static_cast<float>(p.Number("rope_theta", false, rope->theta));
    partial = p.Number("partial_rotary_factor", false, partial);
    const char* type_key = p.Has("rope_type") ? "rope_type" : "type";
    const std::string type = p.String(type_key, "default");
    p.Ignore({"rope_type", "type"});
    ReadScaling(p, type, type_key, rope);
    partial_default_path = type == "default";
  }
  // A top-level original_max_position_embeddings wins over the dict's, as transformers reads it.
  if (r.Has("original_max_position_embeddings"))
    rope->original_max_position_embeddings = r.Int("original_max_position_embeddings", false);
  if (rope->original_max_position_embeddings <= 0) rope->original_max_position_embeddings = c->max_position_embeddings;
  if (!(partial > 0.0 && partial <= 1.0)) r.Fail("key 'partial_rotary_factor' must be in (0, 1]");
  // Most families' own default RoPE rotates the whole head whatever the factor says; only the
  // scaled types (and families whose default honours it) rotate part of it, as transformers does.
  if (partial_default_path && !defaults.partial_in_default) partial = 1.0;
  rope->rotary_dim = static_cast<int32_t>(static_cast<double>(head_dim) * partial);
  if (rope->rotary_dim % 2 != 0)
    r.Fail(absl::StrCat("head_dim (", head_dim, ") × partial_rotary_factor (", partial, ") = ", rope->rotary_dim,
                        " rotary dims: must be even"));
  if (!(rope->theta > 0.f)) r.Fail("key 'rope_theta' must be positive");
}

void ReadActivation(ConfigReader& r, ModelConfig* c, bool allow_situ) {
  const std::string act = r.String("hidden_act", "silu");
  if (act == "silu" || act == "swish") {
    c->hidden_act = Activation::kSiLU;
  } else if (act == "situ" && allow_situ) {
    // The general SiTU's bounds (K3: β = 4, γ = 25); absent, today's σ(g)·tanh(g)·u.
    const double beta = r.Number("activation_situ_beta", false, 1.0);
    const double linear_beta = r.Number("activation_situ_linear_beta", false, 0.0);
    if (!(beta > 0.0)) r.Fail("key 'activation_situ_beta' must be positive");
    if (linear_beta < 0.0) r.Fail("key 'activation_situ_linear_beta' must not be negative (0: unbounded)");
    c->hidden_act = GluAct(Activation::kSiTU, static_cast<float>(beta), static_cast<float>(linear_beta));
  } else {
    r.Unsupported("hidden_act", allow_situ ? "\"situ\" or \"silu\"" : "\"silu\"");
  }
}

void PlanLayers(ModelConfig* c, int32_t first_dense) {
  c->layers.assign(std::max(0, c->num_hidden_layers), LayerPlan{});
  for (int32_t l = 0; l < c->num_hidden_layers; ++l) c->layers[l].ffn = l < first_dense ? FfnKind::kDense : FfnKind::kMoe;
}

void PlanSparseLayers(ConfigReader& r, ModelConfig* c) {
  const int64_t step = r.Int("decoder_sparse_step", false, 1);
  const std::vector<int64_t> dense = r.IntList("mlp_only_layers");
  if (step < 1) r.Fail("key 'decoder_sparse_step' must be at least 1");
  PlanLayers(c, 0);
  for (int32_t l = 0; l < c->num_hidden_layers; ++l) {
    const bool listed = std::find(dense.begin(), dense.end(), l) != dense.end();
    const bool moe = !listed && c->moe.num_experts > 0 && step >= 1 && (l + 1) % step == 0;
    c->layers[l].ffn = moe ? FfnKind::kMoe : FfnKind::kDense;
  }
}

void ReadQwenLayerTypes(ConfigReader& r, ModelConfig* c, QwenWindowLayers rule) {
  const bool sliding = r.Bool("use_sliding_window", false);
  const int64_t window = r.Int("sliding_window", false, 4096);
  const int64_t max_window_layers = r.Int("max_window_layers", false, 28);
  std::vector<bool> slides(c->num_hidden_layers, false);
  if (r.Has("layer_types")) {
    // An explicit list wins, as transformers reads it.
    const std::string err = "key 'layer_types' must list \"full_attention\" or \"sliding_attention\" per layer";
    std::optional<std::vector<std::string>> list = r.StringList("layer_types");
    if (!list || static_cast<int64_t>(list->size()) != c->num_hidden_layers) {
      r.Fail(err);
      return;
    }
    for (int32_t l = 0; l < c->num_hidden_layers; ++l) {
      if ((*list)[l] == "sliding_attention") {
        slides[l] = true;
      } else if ((*list)[l] != "full_attention") {
        r.Fail(err);
        return;
      }
    }
  } else {
    for (int32_t l = 0; l < c->num_hidden_layers; ++l)
      slides[l] = rule == QwenWindowLayers::kFromMax ? l >= max_window_layers : l % 2 == 0 && l < max_window_layers;
  }
  if (!sliding) return;  // transformers sets no window at all without use_sliding_window
  if (!r.Has("sliding_window") || window <= 0) r.Fail("key 'sliding_window' must be positive with use_sliding_window");
  for (int32_t l = 0; l < c->num_hidden_layers; ++l)
    if (slides[l]) c->layers[l].sliding_window = static_cast<int32_t>(window);
}

void ReadQwen3AttentionKeys(ConfigReader& r, ModelConfig* c) {
  ReadDecoderKeys(r, c, DecoderDefaults{.max_position_embeddings = 32768});
  ReadGqaKeys(r, c);
  GqaConfig& a = c->attention;
  a.qkv_bias = a.o_bias = r.Bool("attention_bias", false);
  a.qk_norm = true;
  ReadRopeKeys(r, c, RopeDefaults{}, a.head_dim, &a.rope);
  ReadActivation(r, c, /*allow_situ=*/false);
}

void ReadDeepseekMoeKeys(ConfigReader& r, ModelConfig* c, const MoeDefaults& defaults) {
  MoeConfig& m = c->moe;
  m.num_experts = static_cast<int32_t>(r.Int({"n_routed_experts", "num_local_experts", "num_experts"}, true));
  m.top_k = static_cast<int32_t>(r.Int({"num_experts_per_tok", "num_experts_per_token"}, true));
  m.expert_ffn = r.Int("moe_intermediate_size", true);
  m.shared_ffn = r.Int({"n_shared_experts", "num_shared_experts"}, false, defaults.n_shared_experts) * m.expert_ffn;
  m.scoring = ScoringFunc::kSigmoid;
  m.n_group = static_cast<int32_t>(r.Int({"n_group", "num_expert_group"}, false, defaults.n_group));
  m.topk_group = static_cast<int32_t>(r.Int("topk_group", false, defaults.topk_group));
  m.norm_topk_prob = r.Bool({"norm_topk_prob", "moe_renormalize"}, defaults.norm_topk_prob);
  m.routed_scaling_factor =
      static_cast<float>(r.Number("routed_scaling_factor", false, defaults.routed_scaling_factor));
  c->intermediate_size = r.Int("intermediate_size", false, 0);
  const int64_t first_dense = r.Int("first_k_dense_replace", false, defaults.first_k_dense_replace);
  if (first_dense < 0 || first_dense > c->num_hidden_layers)
    r.Fail("key 'first_k_dense_replace' must be within [0, num_hidden_layers]");
  PlanLayers(c, static_cast<int32_t>(first_dense));
}

void ReadMlaKeys(ConfigReader& r, ModelConfig* c, const MlaDefaults& defaults) {
  MlaConfig& m = c->mla;
  m.num_heads = static_cast<int32_t>(r.Int("num_attention_heads", true));
  if (r.Has("num_key_value_heads") && r.Int("num_key_value_heads", false) != m.num_heads)
    r.Unsupported("num_key_value_heads", "MLA expands keys and values for every query head: it must equal "
                                         "num_attention_heads");
  m.q_lora_rank = r.IsNull("q_lora_rank") ? 0 : r.Int("q_lora_rank", false, defaults.q_lora_rank);
  m.kv_lora_rank = r.Int("kv_lora_rank", true);
  m.qk_nope_head_dim = static_cast<int32_t>(r.Int("qk_nope_head_dim", true));
  m.qk_rope_head_dim = static_cast<int32_t>(r.Int("qk_rope_head_dim", true));
  m.v_head_dim = static_cast<int32_t>(r.Int("v_head_dim", true));
  m.bias = r.Bool("attention_bias", false);
  // Derived values transformers 5 writes back; qk_nope + qk_rope and qk_rope are what it means.
  r.Ignore({"head_dim", "qk_head_dim"});
  m.softmax_scale = 1.f / std::sqrt(static_cast<float>(m.qk_nope_head_dim + m.qk_rope_head_dim));
  m.use_rope = defaults.rope;
  if (!defaults.rope) return;
  ReadRopeKeys(r, c, RopeDefaults{}, m.qk_rope_head_dim, &m.rope);
  m.rope.interleaved = r.Bool("rope_interleave", true);
  // DeepSeek's attention scale grows with YaRN's magnitude correction of all dims, squared.
  if (m.rope.scaling != RopeConfig::Scaling::kNone && m.rope.mscale_all_dim != 0.f) {
    const float ms = m.rope.factor <= 1.f
                         ? 1.f
                         : static_cast<float>(0.1 * m.rope.mscale_all_dim * std::log(static_cast<double>(m.rope.factor)) + 1.0);
    m.softmax_scale *= ms * ms;
  }
}

void ReadKimiLayerKinds(ConfigReader& r, ModelConfig* c) {
  const int32_t L = c->num_hidden_layers;
  KdaConfig& k = c->kda;
  k.num_heads = static_cast<int32_t>(r.Int("linear_num_heads", false, 0));
  k.head_dim = static_cast<int32_t>(r.Int("linear_head_dim", false, 0));
  k.conv_kernel = static_cast<int32_t>(r.Int("linear_conv_kernel_dim", false, 4));
  std::vector<bool> kda(L, false);
  for (int32_t l = 0; l < L; ++l) kda[l] = !(l > 0 && l % 4 == 0);
  if (std::optional<ConfigReader> lin = r.Object("linear_attn_config")) {
    k.num_heads = static_cast<int32_t>(lin->Int("num_heads", k.num_heads == 0, k.num_heads));
    k.head_dim = static_cast<int32_t>(lin->Int("head_dim", k.head_dim == 0, k.head_dim));
    k.conv_kernel = static_cast<int32_t>(lin->Int("short_conv_kernel_size", false, k.conv_kernel));
    const std::vector<int64_t> kda_layers = lin->IntList("kda_layers"), full = lin->IntList("full_attn_layers");
    if (!kda_layers.empty() || !full.empty()) {
      for (int32_t l = 0; l < L; ++l) kda[l] = true;
      for (int64_t one_based : full) {
        if (one_based < 1 || one_based > L) {
          r.Fail(absl::StrCat("key 'linear_attn_config.full_attn_layers' names layer ", one_based,
                              " (1-based), outside [1, ", L, "]"));
          return;
        }
        kda[one_based - 1] = false;
      }
      for (int64_t one_based : kda_layers)
        if (one_based < 1 || one_based > L || !kda[one_based - 1]) {
          r.Fail(absl::StrCat("key 'linear_attn_config.kda_layers' names layer ", one_based,
                              " (1-based), outside [1, ", L, "] or also a full-attention layer"));
          return;
        }
    }
    if (lin->Has("gate_lower_bound")) {
      k.gate = KdaGate::kBoundedSigmoid;
      k.gate_lower_bound = static_cast<float>(lin->Number("gate_lower_bound", false, 0.0));
    }
    k.full_rank_output_gate = lin->Bool("use_full_rank_gate", false);
  }
  if (std::optional<std::vector<std::string>> types = r.StringList("layer_types")) {
    if (static_cast<int32_t>(types->size()) != L) {
      r.Fail(absl::StrCat("key 'layer_types' has ", types->size(), " entries for ", L, " layers"));
      return;
    }
    for (int32_t l = 0; l < L; ++l) {
      if ((*types)[l] != "linear_attention" && (*types)[l] != "full_attention") {
        r.Fail("key 'layer_types' must list \"linear_attention\" or \"full_attention\" per layer");
        return;
      }
      kda[l] = (*types)[l] == "linear_attention";
    }
  }
  for (int32_t l = 0; l < L; ++l) c->layers[l].attention = kda[l] ? AttentionKind::kKda : AttentionKind::kMla;
  if (std::optional<std::vector<std::string>> mlp = r.StringList("mlp_layer_types")) {
    if (static_cast<int32_t>(mlp->size()) != L) {
      r.Fail(absl::StrCat("key 'mlp_layer_types' has ", mlp->size(), " entries for ", L, " layers"));
      return;
    }
    for (int32_t l = 0; l < L; ++l) {
      if ((*mlp)[l] != "dense" && (*mlp)[l] != "sparse") {
        r.Fail("key 'mlp_layer_types' must list \"dense\" or \"sparse\" per layer");
        return;
      }
      c->layers[l].ffn = (*mlp)[l] == "dense" ? FfnKind::kDense : FfnKind::kMoe;
    }
  }
}

void ReadKimiKeys(ConfigReader& r, ModelConfig* c, const MoeDefaults& moe) {
  ReadDecoderKeys(r, c, DecoderDefaults{.rms_norm_eps = 1e-5, .max_position_embeddings = 4096});
  // transformers' Kimi models never tie the head: without lm_head.weight they would run a random one.
  if (c->tie_word_embeddings) r.Unsupported("tie_word_embeddings", "false: Kimi models keep their own head");
  ReadDeepseekMoeKeys(r, c, moe);
  ReadMlaKeys(r, c, MlaDefaults{.q_lora_rank = 0, .rope = false});
  r.Ignore({"rope_theta", "rope_scaling", "rope_parameters", "num_nextn_predict_layers"});
  if (r.String("moe_router_activation_func", "sigmoid") != "sigmoid")
    r.Unsupported("moe_router_activation_func", "\"sigmoid\"");
  if (!r.Bool("mla_use_nope", true)) r.Unsupported("mla_use_nope", "true: the MLA layers apply no RoPE");
  if (r.Int("moe_layer_freq", false, 1) != 1) r.Unsupported("moe_layer_freq", "1: every layer after the dense ones");
  ReadKimiLayerKinds(r, c);
}

void ReadNextTokenLayers(ConfigReader& r, ModelConfig* c) {
  const int64_t n = r.Int({"num_nextn_predict_layers", "num_mtp_layers"}, false, 0);
  if (n < 0 || n > 64) r.Fail("key 'num_nextn_predict_layers' must be within [0, 64]");
  c->num_nextn_predict_layers = static_cast<int32_t>(std::clamp<int64_t>(n, 0, 64));
}

bool IsMtpLayerTensor(const std::string& tensor, const ModelConfig& c) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (tensor.rfind(kPrefix, 0) != 0) return false;
  int64_t layer = 0;
  size_t i = kPrefix.size();
  if (i >= tensor.size() || !std::isdigit(static_cast<unsigned char>(tensor[i]))) return false;
  for (; i < tensor.size() && std::isdigit(static_cast<unsigned char>(tensor[i])) && layer < (1 << 20); ++i)
    layer = layer * 10 + (tensor[i] - '0');
  return i < tensor.size() && tensor[i] == '.' && layer >= c.num_hidden_layers;
}

}  // namespace ls
