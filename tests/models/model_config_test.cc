// config.json parsing: defaults, null handling, and errors that name the key.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ls
