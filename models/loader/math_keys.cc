// The math-changing keys and their neutral values.
#include "models/loader/math_keys.h"

#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace ls {
namespace {

using json = nlohmann::json;

enum class Neutral { kFalse, kNullOrFalse, kNullOrZero, kOne, kSilu, kNone, kRope };

struct MathKey {
  std::string_view name;
  Neutral neutral;
};

// Keys of transformers configs (any family) whose non-neutral value changes the forward pass.
constexpr MathKey kMathKeys[] = {
    {"attention_bias", Neutral::kFalse},          {"qkv_bias", Neutral::kFalse},
    {"mlp_bias", Neutral::kFalse},                {"bias", Neutral::kFalse},
    {"use_qkv_bias", Neutral::kFalse},            {"o_proj_bias", Neutral::kFalse},
    {"sliding_window", Neutral::kNullOrZero},     {"use_sliding_window", Neutral::kFalse},
    {"rope_scaling", Neutral::kNone},             {"rope_parameters", Neutral::kRope},
    {"partial_rotary_factor", Neutral::kOne},     {"rotary_pct", Neutral::kOne},
    {"hidden_act", Neutral::kSilu},               {"hidden_activation", Neutral::kSilu},
    {"final_logit_softcapping", Neutral::kNullOrZero}, {"attn_logit_softcapping", Neutral::kNullOrZero},
    {"logit_scale", Neutral::kOne},               {"logits_scaling", Neutral::kOne},
    {"embedding_multiplier", Neutral::kOne},      {"residual_multiplier", Neutral::kOne},
    {"attention_multiplier", Neutral::kNone},     {"query_pre_attn_scalar", Neutral::kNone},
    {"use_qk_norm", Neutral::kFalse},             {"qk_layernorm", Neutral::kFalse},
    {"clip_qkv", Neutral::kNone},                 {"use_parallel_residual", Neutral::kFalse},
    {"alibi", Neutral::kFalse},                   {"n_shared_experts", Neutral::kNullOrZero},
    {"num_shared_experts", Neutral::kNullOrZero}, {"shared_expert_intermediate_size", Neutral::kNullOrZero},
    {"moe_shared_expert_intermediate_size", Neutral::kNullOrZero},
};

bool IsNeutral(const json& v, Neutral n) {
  switch (n) {
    case Neutral::kFalse: return v.is_null() || (v.is_boolean() && !v.get<bool>());
    case Neutral::kNullOrFalse: return v.is_null() || v == false;
    case Neutral::kNullOrZero: return v.is_null() || (v.is_number() && v.get<double>() == 0.0) || v == false;
    case Neutral::kOne: return v.is_null() || (v.is_number() && v.get<double>() == 1.0);
    case Neutral::kSilu: return v.is_null() || v == "silu" || v == "swish";
    case Neutral::kNone: return v.is_null();
    case Neutral::kRope: {  // a RoPE dict saying nothing beyond plain RoPE's theta
      if (v.is_null()) return true;
      if (!v.is_object()) return false;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (it.key() == "rope_theta") continue;
        if ((it.key() == "rope_type" || it.key() == "type") && it.value() == "default") continue;
        return false;
      }
      return true;
    }
  }
  return false;
}

// The value at a dotted path of `config` (null when absent).
const json* At(const json& config, const std::string& path) {
  const json* j = &config;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!j->is_object()) return nullptr;
    auto it = j->find(part);
    if (it == j->end()) return nullptr;
    j = &*it;
    if (dot == std::string::npos) return j;
    start = dot + 1;
  }
}

}  // namespace

absl::Status CheckUnreadMathKeys(const json& config, const std::vector<std::string>& unread, const std::string& family,
                                 const std::string& source) {
  for (const std::string& path : unread) {
    const size_t dot = path.rfind('.');
    const std::string_view name = dot == std::string::npos ? std::string_view(path) : std::string_view(path).substr(dot + 1);
    for (const MathKey& k : kMathKeys) {
      if (k.name != name) continue;
      const json* v = At(config, path);
      if (!v || IsNeutral(*v, k.neutral)) break;
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": key '", path, "' = ", v->dump(), " changes the math, and ", family,
          " does not implement it (the family does not read this key)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ls
