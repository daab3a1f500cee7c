// Random checkpoint writer for benchmarks.
#include "bench/random_model.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "models/loader/safetensors_writer.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"

namespace ls::bench {

absl::Status WriteRandomModel(const RandomModelSpec& s, const std::string& dir, unsigned seed) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  SafetensorsWriter w;
  std::function<void(const std::string&, int, int)> lin = [&](const std::string& name, int out, int in) {
    std::vector<float> v(static_cast<size_t>(out) * in);
    const float scale = 1.f / std::sqrt(static_cast<float>(in));
    for (auto& x : v) x = nd(rng) * scale;
    w.Add(name, {out, in}, v, DType::kBF16);
  };
  // `name` as weight_packed [out, in/2] (two E2M1 codes a byte) and weight_scale [out, in/32] (E8M0
  // around 2^-5, so that values stay near the BF16 experts' 1/sqrt(in) scale).
  std::function<void(const std::string&, int, int)> mxfp4 = [&](const std::string& name, int out, int in) {
    const std::string module = name.substr(0, name.size() - std::string(".weight").size());
    std::string codes(static_cast<size_t>(out) * in / 2, '\0'), scales(static_cast<size_t>(out) * in / 32, '\0');
    for (auto& c : codes) c = static_cast<char>(rng());
    for (auto& c : scales) c = static_cast<char>(118 + rng() % 4);
    w.AddRaw(module + ".weight_packed", {out, in / 2}, DType::kU8, std::move(codes));
    w.AddRaw(module + ".weight_scale", {out, in / 32}, DType::kU8, std::move(scales));
  };
  // `name` as weight_packed [out, in/8] (eight codes an int32, the first in the low nibble),
  // weight_scale [out, in/group] (BF16, so that (c − 8) · s keeps the BF16 experts' 1/sqrt(in)
  // scale), weight_shape, and with zero points weight_zero_point [out/8, in/group] (eight an int32
  // down the rows).
  std::function<void(const std::string&, int, int)> int4 = [&](const std::string& name, int out, int in) {
    const std::string module = name.substr(0, name.size() - std::string(".weight").size());
    const int groups = (in + s.int4_experts_group - 1) / s.int4_experts_group;
    std::string codes(static_cast<size_t>(out) * in / 2, '\0');
    for (auto& c : codes) c = static_cast<char>(rng());
    w.AddRaw(module + ".weight_packed", {out, in / 8}, DType::kI32, std::move(codes));
    std::vector<float> scales(static_cast<size_t>(out) * groups);
    const float scale = 1.f / (4.6f * std::sqrt(static_cast<float>(in)));
    for (auto& x : scales) x = scale * (0.75f + 0.5f * static_cast<float>(rng() % 1024) / 1024.f);
    w.Add(module + ".weight_scale", {out, groups}, scales, DType::kBF16);
    std::string shape(16, '\0');
    const int64_t dims[2] = {out, in};
    std::memcpy(shape.data(), dims, 16);
    w.AddRaw(module + ".weight_shape", {2}, DType::kI64, std::move(shape));
    if (s.int4_zero_points) {
      std::string zeros(static_cast<size_t>((out + 7) / 8) * groups * 4, '\0');
      for (auto& c : zeros) c = static_cast<char>(rng());
      w.AddRaw(module + ".weight_zero_point", {(out + 7) / 8, groups}, DType::kI32, std::move(zeros));
    }
  };
  auto ones = [&](const std::string& name, int n) { w.Add(name, {n}, std::vector<float>(n, 1.f), DType::kBF16); };
  const int wd = s.d_lat > 0 ? s.d_lat : s.d;
  {
    std::vector<float> e(static_cast<size_t>(s.vocab) * s.d);
    for (auto& x : e) x = nd(rng);
    if (s.mtp_copy)
      for (int r = 0; r < s.vocab; ++r) {
        float* row = e.data() + static_cast<size_t>(r) * s.d;
        double ss = 0;
        for (int j = 0; j < s.d; ++j) ss += static_cast<double>(row[j]) * row[j];
        const float scale = static_cast<float>(1.0 / std::sqrt(ss / s.d));
        for (int j = 0; j < s.d; ++j) row[j] *= scale;
      }
    w.Add("model.embed_tokens.weight", {s.vocab, s.d}, e, DType::kBF16);
  }
  ones("model.norm.weight", s.d);
  lin("lm_head.weight", s.vocab, s.d);
  // The MTP layer's block repeats the last layer's draws.
  std::mt19937 last_layer_rng = rng;
  for (int i = 0; i <= s.layers; ++i) {
    if (i == s.layers && !(s.mtp_copy && s.mla_latent > 0)) break;
    if (i == s.layers - 1) last_layer_rng = rng;
    if (i == s.layers) {
      rng = last_layer_rng;
      const std::string p = absl::StrCat("model.layers.", i, ".");
      ones(p + "enorm.weight", s.d);
      ones(p + "hnorm.weight", s.d);
      ones(p + "shared_head.norm.weight", s.d);
      std::vector<float> eh(static_cast<size_t>(s.d) * 2 * s.d, 0.f);
      for (int j = 0; j < s.d; ++j) eh[static_cast<size_t>(j) * 2 * s.d + j] = 1.f;
      w.Add(p + "eh_proj.weight", {s.d, 2 * s.d}, eh, DType::kBF16);
    }
    const std::string p = absl::StrCat("model.layers.", i, ".");
    ones(p + "input_layernorm.weight", s.d);
    ones(p + "post_attention_layernorm.weight", s.d);
    const bool kda_full = s.kda && s.full_attn_every > 0 && (i + 1) % s.full_attn_every == 0;
    if (kda_full) {  // Kimi-Linear's MLA layers: the config's latent 32, 16-wide heads
      lin(p + "self_attn.q_proj.weight", s.heads * 32, s.d);
      lin(p + "self_attn.kv_a_proj_with_mqa.weight", 32 + 16, s.d);
      ones(p + "self_attn.kv_a_layernorm.weight", 32);
      lin(p + "self_attn.kv_b_proj.weight", s.heads * 32, 32);
      lin(p + "self_attn.o_proj.weight", s.d, s.heads * 16);
    } else if (s.kda) {
      const int C = s.heads * s.head_dim;
      for (const char* n : {"q", "k", "v"}) {
        lin(p + "self_attn." + n + "_proj.weight", C, s.d);
        std::vector<float> conv(static_cast<size_t>(C) * 4);
        for (auto& x : conv) x = nd(rng) * 0.5f;
        w.Add(p + "self_attn." + n + "_conv1d.weight", {C, 1, 4}, conv, DType::kF32);
      }
      lin(p + "self_attn.f_a_proj.weight", s.head_dim, s.d);
      lin(p + "self_attn.f_b_proj.weight", C, s.head_dim);
      lin(p + "self_attn.b_proj.weight", s.heads, s.d);
      w.Add(p + "self_attn.A_log", {1, 1, s.heads, 1}, std::vector<float>(s.heads, 0.f), DType::kF32);
      w.Add(p + "self_attn.dt_bias", {C}, std::vector<float>(C, 0.f), DType::kF32);
      lin(p + "self_attn.g_a_proj.weight", s.head_dim, s.d);
      lin(p + "self_attn.g_b_proj.weight", C, s.head_dim);
      w.Add(p + "self_attn.o_norm.weight", {s.head_dim}, std::vector<float>(s.head_dim, 1.f), DType::kF32);
      lin(p + "self_attn.o_proj.weight", s.d, C);
    } else if (s.mla_latent > 0) {
      lin(p + "self_attn.q_proj.weight", s.heads * (s.mla_nope + s.mla_rope), s.d);
      lin(p + "self_attn.kv_a_proj_with_mqa.weight", s.mla_latent + s.mla_rope, s.d);
      ones(p + "self_attn.kv_a_layernorm.weight", s.mla_latent);
      lin(p + "self_attn.kv_b_proj.weight", s.heads * (s.mla_nope + s.mla_v), s.mla_latent);
      lin(p + "self_attn.o_proj.weight", s.d, s.heads * s.mla_v);
    } else {
      lin(p + "self_attn.q_proj.weight", s.heads * s.head_dim, s.d);
      lin(p + "self_attn.k_proj.weight", s.kv_heads * s.head_dim, s.d);
      lin(p + "self_attn.v_proj.weight", s.kv_heads * s.head_dim, s.d);
      lin(p + "self_attn.o_proj.weight", s.d, s.heads * s.head_dim);
    }
    const std::string moe = s.kda ? p + "block_sparse_moe." : p + "mlp.";
    lin(moe + "gate.weight", s.experts, s.d);
    w.Add(moe + "gate.e_score_correction_bias", {s.experts}, std::vector<float>(s.experts, 0.f), DType::kF32);
    if (s.d_lat > 0) {
      lin(p + "mlp.latent_down_proj.weight", s.d_lat, s.d);
      lin(p + "mlp.latent_up_proj.weight", s.d, s.d_lat);
    }
    if (s.expert_output_norm) ones(p + "mlp.latent_norm.weight", wd);
    for (int e = 0; e < s.experts; ++e) {
      const std::string q = absl::StrCat(moe, "experts.", e, ".");
      auto expert = s.mxfp4_experts ? mxfp4 : s.int4_experts_group > 0 ? int4 : lin;
      expert(q + (s.kda ? "w1" : "gate_proj") + ".weight", s.f, wd);
      expert(q + (s.kda ? "w3" : "up_proj") + ".weight", s.f, wd);
      expert(q + (s.kda ? "w2" : "down_proj") + ".weight", wd, s.f);
    }
    if (s.shared_f > 0) {
      lin(moe + "shared_experts.gate_proj.weight", s.shared_f, s.d);
      lin(moe + "shared_experts.up_proj.weight", s.shared_f, s.d);
      lin(moe + "shared_experts.down_proj.weight", s.d, s.shared_f);
    }
  }
  nlohmann::json c = {{"architectures", {"StableLatentMoeForCausalLM"}},
                      {"vocab_size", s.vocab},
                      {"hidden_size", s.d},
                      {"num_hidden_layers", s.layers},
                      {"num_attention_heads", s.heads},
                      {"num_key_value_heads", s.kv_heads},
                      {"head_dim", s.head_dim},
                      {"rms_norm_eps", 1e-6},
                      {"rope_theta", 1e6},
                      {"max_position_embeddings", 4096},
                      {"n_routed_experts", s.experts},
                      {"num_experts_per_tok", s.top_k},
                      {"moe_intermediate_size", s.f},
                      {"moe_latent_size", s.d_lat > 0 ? nlohmann::json(s.d_lat) : nlohmann::json(nullptr)},
                      {"n_shared_experts", s.shared_f > 0 ? 1 : 0},
                      {"shared_expert_intermediate_size", s.shared_f},
                      {"hidden_act", s.situ ? "situ" : "silu"},
                      {"scoring_func", s.sigmoid ? "sigmoid" : "softmax"},
                      {"norm_topk_prob", true},
                      {"expert_output_norm", s.expert_output_norm},
                      {"eos_token_id", 2}};
  if (s.mla_latent > 0) {
    // DeepSeek-V3's schema: MLA, dense layers none, one shared expert of the routed width.
    c = {{"architectures", {"DeepseekV3ForCausalLM"}},
         {"model_type", "deepseek_v3"},
         {"vocab_size", s.vocab},
         {"hidden_size", s.d},
         {"num_hidden_layers", s.layers},
         {"num_attention_heads", s.heads},
         {"num_key_value_heads", s.heads},
         {"q_lora_rank", nullptr},
         {"kv_lora_rank", s.mla_latent},
         {"qk_nope_head_dim", s.mla_nope},
         {"qk_rope_head_dim", s.mla_rope},
         {"v_head_dim", s.mla_v},
         {"rms_norm_eps", 1e-6},
         {"rope_theta", 1e6},
         {"max_position_embeddings", 4096},
         {"n_routed_experts", s.experts},
         {"num_experts_per_tok", s.top_k},
         {"moe_intermediate_size", s.f},
         {"n_shared_experts", s.shared_f > 0 ? s.shared_f / s.f : 0},
         {"first_k_dense_replace", 0},
         {"n_group", 1},
         {"topk_group", 1},
         {"routed_scaling_factor", 1.0},
         {"norm_topk_prob", true},
         {"hidden_act", "silu"},
         {"num_nextn_predict_layers", s.mtp_copy ? 1 : 0},
         {"eos_token_id", 2}};
  }
  if (s.kda) {
    // Kimi-Linear's schema (layers numbered from 1), no dense layers.
    std::vector<int> kda_layers, full_layers;
    for (int i = 1; i <= s.layers; ++i)
      (s.full_attn_every > 0 && i % s.full_attn_every == 0 ? full_layers : kda_layers).push_back(i);
    c = {{"architectures", {"KimiLinearForCausalLM"}},
         {"model_type", "kimi_linear"},
         {"vocab_size", s.vocab},
         {"hidden_size", s.d},
         {"num_hidden_layers", s.layers},
         {"num_attention_heads", s.heads},
         {"num_key_value_heads", s.heads},
         {"q_lora_rank", nullptr},
         {"kv_lora_rank", 32},
         {"qk_nope_head_dim", 16},
         {"qk_rope_head_dim", 16},
         {"v_head_dim", 16},
         {"linear_attn_config",
          {{"kda_layers", kda_layers}, {"full_attn_layers", full_layers}, {"num_heads", s.heads},
           {"head_dim", s.head_dim}, {"short_conv_kernel_size", 4}}},
         {"rms_norm_eps", 1e-6},
         {"model_max_length", 8192},
         {"num_experts", s.experts},
         {"num_experts_per_token", s.top_k},
         {"moe_intermediate_size", s.f},
         {"num_shared_experts", s.shared_f > 0 ? s.shared_f / s.f : 0},
         {"first_k_dense_replace", 0},
         {"routed_scaling_factor", 1.0},
         {"moe_renormalize", true},
         {"hidden_act", "silu"},
         {"eos_token_id", 2}};
  }
  if (s.mxfp4_experts)
    c["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "mxfp4-pack-quantized"},
        {"quantization_status", "compressed"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"re:.*experts\\.\\d+\\..*"}},
            {"format", "mxfp4-pack-quantized"},
            {"weights",
             {{"num_bits", 4}, {"type", "float"}, {"symmetric", true}, {"group_size", 32}, {"strategy", "group"},
              {"dynamic", false}, {"scale_dtype", "torch.uint8"}}},
            {"input_activations", nullptr},
            {"output_activations", nullptr}}}}},
        {"ignore", {"lm_head"}}};
  if (s.int4_experts_group > 0) {
    const nlohmann::json weights = {{"num_bits", 4},
                                    {"type", "int"},
                                    {"symmetric", !s.int4_zero_points},
                                    {"group_size", s.int4_experts_group},
                                    {"strategy", "group"},
                                    {"dynamic", false}};
    c["quantization_config"] = {{"quant_method", "compressed-tensors"},
                                {"format", "pack-quantized"},
                                {"quantization_status", "compressed"},
                                {"config_groups",
                                 {{"group_0",
                                   {{"targets", {"re:.*experts\\.\\d+\\..*"}},
                                    {"format", "pack-quantized"},
                                    {"weights", weights},
                                    {"input_activations", nullptr},
                                    {"output_activations", nullptr}}}}},
                                {"ignore", {"lm_head"}}};
  }
  std::ofstream(dir + "/config.json") << c.dump(1);
  return w.Write(dir + "/model.safetensors");
}

std::unique_ptr<Model> WriteAndLoadRandomModel(const RandomModelSpec& spec, const std::string& dir, Backend* backend) {
  if (absl::Status s = WriteRandomModel(spec, dir, 1); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
  auto model = LoadModel(dir, backend);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    std::exit(1);
  }
  return std::move(*model);
}

}  // namespace ls::bench
