// ModelConfig parsing and validation with nlohmann/json; every error names the file and key.
#include "models/loader/model_config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ls {
namespace {

using json = nlohmann::json;

class Reader {
 public:
  Reader(const json& j, absl::string_view source) : j_(j), source_(source) {}

  absl::Status status() const { return status_; }
  void Fail(std::string msg) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(absl::StrCat(source_, ": ", msg));
  }

  // Integer key; `required` keys must be present, others fall back to `def`.
  int64_t Int(const char* key, bool required, int64_t def = 0) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      if (required) Fail(absl::StrCat("missing required key '", key, "'"));
      return def;
    }
    if (!it->is_number_integer()) {
      Fail(absl::StrCat("key '", key, "' must be an integer, got ", it->dump()));
      return def;
    }
    return it->get<int64_t>();
  }
  double Number(const char* key, bool required, double def) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      if (required) Fail(absl::StrCat("missing required key '", key, "'"));
      return def;
    }
    if (!it->is_number()) {
      Fail(absl::StrCat("key '", key, "' must be a number, got ", it->dump()));
      return def;
    }
    return it->get<double>();
  }
  bool Bool(const char* key, bool def) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return def;
    if (!it->is_boolean()) {
      Fail(absl::StrCat("key '", key, "' must be true or false, got ", it->dump()));
      return def;
    }
    return it->get<bool>();
  }
  std::string String(const char* key, bool required, const char* def) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      if (required) Fail(absl::StrCat("missing required key '", key, "'"));
      return def;
    }
    if (!it->is_string()) {
      Fail(absl::StrCat("key '", key, "' must be a string, got ", it->dump()));
      return def;
    }
    return it->get<std::string>();
  }

 private:
  const json& j_;
  absl::string_view source_;
  absl::Status status_;
};

absl::Status Validate(const ModelConfig& c, absl::string_view source) {
  auto fail = [&](const std::string& msg) { return absl::InvalidArgumentError(absl::StrCat(source, ": ", msg)); };
  auto positive = [&](const char* key, int64_t v) -> absl::Status {
    if (v <= 0) return fail(absl::StrCat("key '", key, "' must be positive, got ", v));
    return absl::OkStatus();
  };
  if (!c.architecture.empty() && c.architecture != "StableLatentMoeForCausalLM")
    return fail(absl::StrCat("unsupported architecture \"", c.architecture,
                             "\" (supported: StableLatentMoeForCausalLM)"));
  for (auto [key, v] : {std::pair<const char*, int64_t>{"vocab_size", c.vocab_size},
                        {"hidden_size", c.hidden_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"num_key_value_heads", c.num_key_value_heads},
                        {"head_dim", c.head_dim},
                        {"max_position_embeddings", c.max_position_embeddings}}) {
    if (auto s = positive(key, v); !s.ok()) return s;
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    return fail(absl::StrCat("num_attention_heads (", c.num_attention_heads,
                             ") must be a multiple of num_key_value_heads (", c.num_key_value_heads, ")"));
  if (c.head_dim % 2 != 0) return fail(absl::StrCat("head_dim must be even for RoPE, got ", c.head_dim));
  if (!(c.rms_norm_eps > 0.f)) return fail("key 'rms_norm_eps' must be positive");
  if (!(c.rope_theta > 0.f)) return fail("key 'rope_theta' must be positive");
  if (c.first_k_dense_replace < 0 || c.first_k_dense_replace > c.num_hidden_layers)
    return fail(absl::StrCat("key 'first_k_dense_replace' (", c.first_k_dense_replace,
                             ") must be within [0, num_hidden_layers = ", c.num_hidden_layers, "]"));
  if (c.first_k_dense_replace > 0)
    if (auto s = positive("intermediate_size", c.intermediate_size); !s.ok()) return s;
  if (c.first_k_dense_replace < c.num_hidden_layers) {
    if (auto s = positive("n_routed_experts", c.n_routed_experts); !s.ok()) return s;
    if (auto s = positive("num_experts_per_tok", c.num_experts_per_tok); !s.ok()) return s;
    if (auto s = positive("moe_intermediate_size", c.moe_intermediate_size); !s.ok()) return s;
    if (c.num_experts_per_tok > c.n_routed_experts)
      return fail(absl::StrCat("num_experts_per_tok (", c.num_experts_per_tok, ") exceeds n_routed_experts (",
                               c.n_routed_experts, ")"));
    if (c.moe_latent_size < 0) return fail("key 'moe_latent_size' must be positive or null");
    if (c.n_shared_experts < 0) return fail("key 'n_shared_experts' must not be negative");
    if (c.n_shared_experts > 0)
      if (auto s = positive("shared_expert_intermediate_size", c.shared_expert_intermediate_size); !s.ok()) return s;
  }
  for (int32_t id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size) return fail(absl::StrCat("eos_token_id ", id, " is outside the vocabulary"));
  if (c.bos_token_id >= c.vocab_size) return fail(absl::StrCat("bos_token_id ", c.bos_token_id, " is outside the vocabulary"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text, absl::string_view source) {
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(source, ": invalid JSON"));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(source, ": expected a JSON object"));

  ModelConfig c;
  Reader r(j, source);
  if (auto it = j.find("architectures"); it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    c.architecture = (*it)[0].get<std::string>();
  c.vocab_size = r.Int("vocab_size", true);
  c.hidden_size = r.Int("hidden_size", true);
  c.num_hidden_layers = static_cast<int32_t>(r.Int("num_hidden_layers", true));
  c.rms_norm_eps = static_cast<float>(r.Number("rms_norm_eps", false, 1e-6));
  c.tie_word_embeddings = r.Bool("tie_word_embeddings", false);
  c.num_attention_heads = static_cast<int32_t>(r.Int("num_attention_heads", true));
  c.num_key_value_heads = static_cast<int32_t>(r.Int("num_key_value_heads", false, c.num_attention_heads));
  c.head_dim = static_cast<int32_t>(
      r.Int("head_dim", false, c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0));
  c.rope_theta = static_cast<float>(r.Number("rope_theta", false, 10000.0));
  c.max_position_embeddings = r.Int("max_position_embeddings", false, 4096);
  c.qk_norm = r.Bool("qk_norm", false);
  c.first_k_dense_replace = static_cast<int32_t>(r.Int("first_k_dense_replace", false, 0));
  c.intermediate_size = r.Int("intermediate_size", false, 0);
  const bool has_moe = c.first_k_dense_replace < c.num_hidden_layers;
  c.n_routed_experts = static_cast<int32_t>(r.Int("n_routed_experts", has_moe));
  c.num_experts_per_tok = static_cast<int32_t>(r.Int("num_experts_per_tok", has_moe));
  c.moe_intermediate_size = r.Int("moe_intermediate_size", has_moe);
  c.moe_latent_size = r.Int("moe_latent_size", false, 0);
  c.n_shared_experts = static_cast<int32_t>(r.Int("n_shared_experts", false, 0));
  c.shared_expert_intermediate_size =
      r.Int("shared_expert_intermediate_size", false, c.n_shared_experts * c.moe_intermediate_size);
  const std::string act = r.String("hidden_act", false, "silu");
  if (act == "situ") {
    c.hidden_act = Activation::kSiTU;
  } else if (act == "silu") {
    c.hidden_act = Activation::kSiLU;
  } else {
    r.Fail(absl::StrCat("key 'hidden_act' must be \"situ\" or \"silu\", got \"", act, "\""));
  }
  const std::string scoring = r.String("scoring_func", false, "softmax");
  if (scoring == "sigmoid") {
    c.scoring_func = ScoringFunc::kSigmoid;
  } else if (scoring == "softmax") {
    c.scoring_func = ScoringFunc::kSoftmax;
  } else {
    r.Fail(absl::StrCat("key 'scoring_func' must be \"sigmoid\" or \"softmax\", got \"", scoring, "\""));
  }
  c.norm_topk_prob = r.Bool("norm_topk_prob", true);
  c.routed_scaling_factor = static_cast<float>(r.Number("routed_scaling_factor", false, 1.0));
  c.expert_output_norm = r.Bool("expert_output_norm", false);
  c.bos_token_id = static_cast<int32_t>(r.Int("bos_token_id", false, -1));
  if (auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
    if (it->is_number_integer()) {
      c.eos_token_ids.push_back(it->get<int32_t>());
    } else if (it->is_array()) {
      for (const auto& v : *it) {
        if (!v.is_number_integer()) {
          r.Fail("key 'eos_token_id' must be an integer or a list of integers");
          break;
        }
        c.eos_token_ids.push_back(v.get<int32_t>());
      }
    } else {
      r.Fail("key 'eos_token_id' must be an integer or a list of integers");
    }
  }
  if (!r.status().ok()) return r.status();
  if (auto s = Validate(c, source); !s.ok()) return s;
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseModelConfig(ss.str(), path);
}

}  // namespace ls
