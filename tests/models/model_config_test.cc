// config.json parsing: defaults, null handling, errors that name the key, and which family (with
// its chat formats) an architecture and model_type select.
#include <gtest/gtest.h>

#include "base/read_file.h"
#include "models/families/family.h"
#include "models/families/load_config.h"
#include "models/loader/model_config.h"

namespace ls {
namespace {

const char* kMinimal = R"({"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
  "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
  "moe_latent_size": null, "shared_expert_intermediate_size": null, "n_shared_experts": 2})";

TEST(ModelConfig, DefaultsAndNulls) {
  auto c = ParseModelConfig(kMinimal, "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->attention.head_dim, 8);
  EXPECT_EQ(c->attention.num_kv_heads, 4);
  EXPECT_EQ(c->moe.latent_size, 0);
  EXPECT_EQ(c->expert_width(), 32);
  EXPECT_EQ(c->moe.shared_ffn, 32);
}

TEST(ModelConfig, WrongTypeNamesKey) {
  auto c = ParseModelConfig(R"({"vocab_size": "100"})", "dir/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "dir/config.json: key 'vocab_size' must be an integer, got \"100\"");
}

TEST(ModelConfig, ALayerCountPastAnyModelIsRefusedBeforeItsPlanIsMade) {
  std::string j = kMinimal;
  j.replace(j.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 2000000000");
  auto c = ParseModelConfig(j, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("key 'num_hidden_layers' is 2000000000; at most 4096"), std::string::npos)
      << c.status();
}

TEST(ModelConfig, InconsistentHeads) {
  std::string j = kMinimal;
  j.insert(1, "\"num_key_value_heads\": 3, ");
  auto c = ParseModelConfig(j, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("multiple of num_key_value_heads"), std::string::npos) << c.status();
}

TEST(ModelConfig, TopKAboveExperts) {
  std::string j = kMinimal;
  j.replace(j.find("\"num_experts_per_tok\": 2"), 24, "\"num_experts_per_tok\": 9");
  auto c = ParseModelConfig(j, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("num_experts_per_tok (9) exceeds n_routed_experts (8)"), std::string::npos);
}

TEST(ModelConfig, UnknownActivationAndArchitecture) {
  std::string j = kMinimal;
  j.insert(1, "\"hidden_act\": \"gelu\", ");
  EXPECT_NE(ParseModelConfig(j, "c").status().message().find("hidden_act"), std::string::npos);
  j = kMinimal;
  j.insert(1, "\"architectures\": [\"LlamaForCausalLM\"], ");
  EXPECT_NE(ParseModelConfig(j, "c").status().message().find("unsupported architecture"), std::string::npos);
}

TEST(ModelConfig, NotAnObject) {
  EXPECT_FALSE(ParseModelConfig("[1,2]", "c").ok());
  EXPECT_FALSE(ParseModelConfig("", "c").ok());
}

// Dense Qwen3 without layer_types: transformers' Qwen3Config slides the layers from
// max_window_layers on, and only with use_sliding_window.
TEST(ModelConfig, DenseQwen3SlidesFromMaxWindowLayers) {
  const std::string base = R"({"architectures": ["Qwen3ForCausalLM"], "vocab_size": 100, "hidden_size": 32,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
    "intermediate_size": 48, "max_window_layers": 1, "sliding_window": 8)";
  auto sliding = ParseModelConfig(base + R"(, "use_sliding_window": true})", "c");
  ASSERT_TRUE(sliding.ok()) << sliding.status();
  EXPECT_FALSE(sliding->has_moe_layers());
  EXPECT_EQ(sliding->layers[0].sliding_window, 0);
  EXPECT_EQ(sliding->layers[1].sliding_window, 8);
  EXPECT_EQ(sliding->layers[2].sliding_window, 8);
  auto full = ParseModelConfig(base + R"(, "use_sliding_window": false})", "c");
  ASSERT_TRUE(full.ok()) << full.status();
  for (const LayerPlan& l : full->layers) EXPECT_EQ(l.sliding_window, 0);
  auto bad = ParseModelConfig(base + R"(, "layer_types": ["full_attention", "chunked"]})", "c");
  EXPECT_NE(bad.status().message().find("layer_types"), std::string::npos) << bad.status();
}

TEST(ModelConfig, FamilyByArchitectureAndModelType) {
  struct Case {
    const char* architecture;
    const char* model_type;
    const char* family;
    const char* tool_call_format;
    const char* reasoning_format;
  };
  const Case cases[] = {
      {"", "", "StableLatentMoE", "hermes", ""},
      {"Qwen3MoeForCausalLM", "qwen3_moe", "Qwen3-MoE", "hermes", ""},
      {"Qwen2MoeForCausalLM", "qwen2_moe", "Qwen2-MoE", "hermes", ""},
      {"Qwen3ForCausalLM", "qwen3", "Qwen3", "hermes", ""},
      {"MixtralForCausalLM", "mixtral", "Mixtral", "", ""},
      {"Glm4MoeForCausalLM", "glm4_moe", "GLM-4-MoE", "glm45", ""},
      {"DeepseekV3ForCausalLM", "deepseek_v3", "DeepSeek-V3", "deepseek_v3", ""},
      {"DeepseekV3ForCausalLM", "", "DeepSeek-V3", "deepseek_v3", ""},
      // Kimi-K2 checkpoints name DeepSeek-V3's architecture and their own model_type.
      {"DeepseekV3ForCausalLM", "kimi_k2", "Kimi-K2", "kimi_k2", ""},
      {"", "kimi_k2", "Kimi-K2", "kimi_k2", ""},
      {"DeepseekV2ForCausalLM", "deepseek_v2", "DeepSeek-V2", "deepseek_v3", ""},
      {"KimiLinearForCausalLM", "kimi_linear", "Kimi-Linear", "kimi_k2", ""},
      {"KimiK3ForConditionalGeneration", "kimi_k3", "Kimi-K3", "xtml", "xtml"},
  };
  for (const Case& c : cases) {
    const Family* f = FindFamily(c.architecture, c.model_type);
    ASSERT_NE(f, nullptr) << c.architecture << " " << c.model_type;
    EXPECT_EQ(f->name, c.family) << c.architecture << " " << c.model_type;
    EXPECT_EQ(f->tool_call_format, c.tool_call_format) << f->name;
    EXPECT_EQ(f->reasoning_format, c.reasoning_format) << f->name;
  }
  EXPECT_EQ(FindFamily("LlamaForCausalLM", "kimi_k2"), nullptr) << "an architecture no family lists";
  EXPECT_EQ(FindFamily("", "llama"), nullptr);
  // The parsed config records the family: a DeepSeek-V3 fixture's config, as Kimi-K2 saves it.
  auto text = ReadFile(std::string(LS_TEST_DATA_DIR) + "/hf/deepseek_v3_f32/config.json");
  ASSERT_TRUE(text.ok()) << text.status();
  const size_t type = text->find("\"model_type\": \"deepseek_v3\"");
  ASSERT_NE(type, std::string::npos);
  text->replace(type, 27, "\"model_type\": \"kimi_k2\"");
  auto config = ParseModelConfig(*text, "c");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family, "Kimi-K2");
  // The list of supported architectures names each once.
  std::string j = kMinimal;
  j.insert(1, "\"architectures\": [\"LlamaForCausalLM\"], ");
  const std::string message(ParseModelConfig(j, "c").status().message());
  const size_t first = message.find("DeepseekV3ForCausalLM");
  ASSERT_NE(first, std::string::npos) << message;
  EXPECT_EQ(message.find("DeepseekV3ForCausalLM", first + 1), std::string::npos) << message;
}

}  // namespace
}  // namespace ls
