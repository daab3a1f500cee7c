// ModelConfig: the validation shared by every family.
#include "models/loader/model_config.h"

#include "absl/strings/str_cat.h"

namespace ls {

bool ModelConfig::has_moe_layers() const {
  for (const LayerPlan& l : layers)
    if (l.ffn == FfnKind::kMoe) return true;
  return false;
}

bool ModelConfig::has_attention(AttentionKind kind) const {
  for (const LayerPlan& l : layers)
    if (l.attention == kind) return true;
  return false;
}

absl::Status ValidateModelConfig(const ModelConfig& c, absl::string_view source) {
  auto fail = [&](const std::string& msg) { return absl::InvalidArgumentError(absl::StrCat(source, ": ", msg)); };
  auto positive = [&](const char* key, int64_t v) -> absl::Status {
    if (v <= 0) return fail(absl::StrCat("key '", key, "' must be positive, got ", v));
    return absl::OkStatus();
  };
  for (auto [key, v] : {std::pair<const char*, int64_t>{"vocab_size", c.vocab_size},
                        {"hidden_size", c.hidden_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"max_position_embeddings", c.max_position_embeddings}}) {
    if (auto s = positive(key, v); !s.ok()) return s;
  }
  if (static_cast<int64_t>(c.layers.size()) != c.num_hidden_layers)
    return fail(absl::StrCat("the layer plan covers ", c.layers.size(), " layers, num_hidden_layers is ",
                             c.num_hidden_layers));
  if (c.has_attention(AttentionKind::kGqa)) {
    const GqaConfig& a = c.attention;
    for (auto [key, v] : {std::pair<const char*, int64_t>{"num_attention_heads", a.num_heads},
                          {"num_key_value_heads", a.num_kv_heads},
                          {"head_dim", a.head_dim}})
      if (auto s = positive(key, v); !s.ok()) return s;
    if (a.num_heads % a.num_kv_heads != 0)
      return fail(absl::StrCat("num_attention_heads (", a.num_heads, ") must be a multiple of num_key_value_heads (",
                               a.num_kv_heads, ")"));
    if (a.rope.rotary_dim > a.head_dim || a.rope.rotary_dim % 2 != 0)
      return fail(absl::StrCat("rotary dims (", a.rope.rotary_dim, ") must be even and at most head_dim (",
                               a.head_dim, ")"));
  }
  if (c.has_attention(AttentionKind::kMla)) {
    const MlaConfig& m = c.mla;
    for (auto [key, v] : {std::pair<const char*, int64_t>{"num_attention_heads", m.num_heads},
                          {"kv_lora_rank", m.kv_lora_rank},
                          {"qk_nope_head_dim", m.qk_nope_head_dim},
                          {"qk_rope_head_dim", m.qk_rope_head_dim},
                          {"v_head_dim", m.v_head_dim}})
      if (auto s = positive(key, v); !s.ok()) return s;
    if (m.q_lora_rank < 0) return fail("key 'q_lora_rank' must be positive or null");
    if (m.use_rope && m.rope.rotary_dim % 2 != 0)
      return fail(absl::StrCat("qk_rope_head_dim (", m.qk_rope_head_dim, ") must be even for RoPE"));
  }
  if (c.has_attention(AttentionKind::kKda)) {
    const KdaConfig& k = c.kda;
    for (auto [key, v] : {std::pair<const char*, int64_t>{"linear_attn_config.num_heads", k.num_heads},
                          {"linear_attn_config.head_dim", k.head_dim},
                          {"linear_attn_config.short_conv_kernel_size", k.conv_kernel}})
      if (auto s = positive(key, v); !s.ok()) return s;
    if (k.conv_kernel > 16) return fail("key 'linear_attn_config.short_conv_kernel_size' must be at most 16");
  }
  if (!(c.rms_norm_eps > 0.f)) return fail("key 'rms_norm_eps' must be positive");
  bool dense = false;
  for (const LayerPlan& l : c.layers) {
    dense |= l.ffn == FfnKind::kDense;
    if (l.sliding_window < 0) return fail("key 'sliding_window' must not be negative");
  }
  if (dense)
    if (auto s = positive("intermediate_size", c.intermediate_size); !s.ok()) return s;
  if (c.has_moe_layers()) {
    const MoeConfig& m = c.moe;
    if (auto s = positive("n_routed_experts", m.num_experts); !s.ok()) return s;
    if (auto s = positive("num_experts_per_tok", m.top_k); !s.ok()) return s;
    if (auto s = positive("moe_intermediate_size", m.expert_ffn); !s.ok()) return s;
    if (m.top_k > m.num_experts)
      return fail(absl::StrCat("num_experts_per_tok (", m.top_k, ") exceeds n_routed_experts (", m.num_experts, ")"));
    if (m.latent_size < 0) return fail("key 'moe_latent_size' must be positive or null");
    if (m.shared_ffn < 0) return fail("the shared experts' width must not be negative");
    if (m.n_group < 1 || m.num_experts % m.n_group != 0)
      return fail(absl::StrCat("n_group (", m.n_group, ") must divide n_routed_experts (", m.num_experts, ")"));
    if (m.topk_group < 1 || m.topk_group > m.n_group)
      return fail(absl::StrCat("topk_group (", m.topk_group, ") must be within [1, n_group = ", m.n_group, "]"));
    if (m.n_group > 1 && m.group_score == GroupScore::kTop2Sum && m.num_experts / m.n_group < 2)
      return fail("group-limited routing needs at least 2 experts per group (groups are ranked by their top 2)");
    if (m.n_group > 1 && static_cast<int64_t>(m.topk_group) * (m.num_experts / m.n_group) < m.top_k)
      return fail(absl::StrCat("topk_group (", m.topk_group, ") groups of ", m.num_experts / m.n_group,
                               " experts hold fewer than num_experts_per_tok (", m.top_k, ")"));
  }
  for (int32_t id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size) return fail(absl::StrCat("eos_token_id ", id, " is outside the vocabulary"));
  if (c.bos_token_id >= c.vocab_size)
    return fail(absl::StrCat("bos_token_id ", c.bos_token_id, " is outside the vocabulary"));
  return absl::OkStatus();
}

}  // namespace ls
