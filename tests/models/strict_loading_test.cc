// Strict loading (docs/formats.md): a checkpoint whose config asks for math the server does not
// implement, or that carries tensors no layer reads, fails to load with a message naming the key
// and value or the tensor; the allowed exceptions (multi-token-prediction layers, a tied model
// that still ships its head) load. Each case edits a copy of a transformers-written fixture.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "models/loader/safetensors_writer.h"
#include "models/loader/weight_store.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace ls {
namespace {

using json = nlohmann::json;

class StrictLoading : public ::testing::Test {
 protected:
  void Use(const std::string& fixture) { UseDir(testing::HfFixtureDir(fixture)); }
  void UseDir(const std::string& dir) {
    dir_ = testing::CopyToTempDir(dir, ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void UseK3() { UseDir(testing::DataDir() + "/k3/k3_tiny_bf16"); }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  void EditConfig(const std::function<void(json&)>& edit) {
    std::ifstream in(dir_ + "/config.json");
    std::stringstream ss;
    ss << in.rdbuf();
    json c = json::parse(ss.str());
    edit(c);
    std::ofstream(dir_ + "/config.json") << c.dump(2);
  }
  // Rewrites the weights with one more tensor of `shape` (zeros).
  void AddTensor(const std::string& name, std::vector<int64_t> shape) {
    SafetensorsWriter w;
    {
      auto store = WeightStore::Open(dir_);
      ASSERT_TRUE(store.ok()) << store.status();
      for (const auto& [n, e] : (*store)->Entries())
        w.AddRaw(n, e->shape, e->dtype, std::string(static_cast<const char*>(e->data), e->bytes));
    }
    int64_t count = 1;
    for (int64_t s : shape) count *= s;
    w.Add(name, shape, std::vector<float>(count, 0.f), DType::kF32);
    ASSERT_TRUE(w.Write(dir_ + "/model.safetensors").ok());
  }
  absl::StatusOr<std::unique_ptr<Model>> Load() { return LoadModel(dir_, &backend_); }
  std::string LoadError() {
    auto m = Load();
    EXPECT_FALSE(m.ok()) << "expected a load error";
    return m.ok() ? "" : std::string(m.status().message());
  }

  CpuBackend backend_{1};
  std::string dir_;
};

TEST_F(StrictLoading, UnsupportedRopeTypeNamesKeyAndValue) {
  Use("qwen3_moe_f32");
  EditConfig([](json& c) { c["rope_scaling"] = {{"type", "longrope"}, {"factor", 4.0}}; });
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("key 'rope_scaling.type' = \"longrope\" is not supported"), std::string::npos) << msg;
}

TEST_F(StrictLoading, TensorNoLayerReadsIsNamed) {
  Use("qwen3_moe_f32");
  AddTensor("model.layers.0.mlp.router_noise.weight", {4});
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("not used by any layer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'model.layers.0.mlp.router_noise.weight'"), std::string::npos) << msg;
}

TEST_F(StrictLoading, UnsupportedActivationIsNamed) {
  Use("mixtral_f32");
  EditConfig([](json& c) { c["hidden_act"] = "gelu"; });
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("key 'hidden_act' = \"gelu\" is not supported"), std::string::npos) << msg;
}

TEST_F(StrictLoading, TwoSpellingsThatDisagreeAreRefused) {
  Use("qwen3_moe_f32");
  EditConfig([](json& c) { c["num_local_experts"] = c["num_experts"].get<int>() / 2; });
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("name the same setting with different values"), std::string::npos) << msg;
}

TEST_F(StrictLoading, SlidingWindowWithoutASizeIsRefused) {
  Use("qwen2_moe_f32");
  EditConfig([](json& c) {
    c["use_sliding_window"] = true;
    c.erase("sliding_window");
  });
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("sliding_window"), std::string::npos) << msg;
}

TEST_F(StrictLoading, MissingBiasTheConfigImpliesIsNamed) {
  Use("glm4_moe_f32");  // attention_bias: true
  EditConfig([](json& c) { c["attention_bias"] = false; });
  const std::string msg = LoadError();  // the biases are now tensors no layer reads
  EXPECT_NE(msg.find("self_attn.q_proj.bias"), std::string::npos) << msg;
}

TEST_F(StrictLoading, UnknownArchitectureListsTheSupportedOnes) {
  Use("mixtral_f32");
  EditConfig([](json& c) { c["architectures"] = {"GptOssForCausalLM"}; });
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("unsupported architecture \"GptOssForCausalLM\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("Qwen3MoeForCausalLM"), std::string::npos) << msg;
}

TEST_F(StrictLoading, MultiTokenPredictionLayersAreSkipped) {
  Use("glm4_moe_f32");
  int layers = 0;
  EditConfig([&](json& c) {
    layers = c["num_hidden_layers"].get<int>();
    c["num_nextn_predict_layers"] = 1;
  });
  AddTensor("model.layers." + std::to_string(layers) + ".eh_proj.weight", {4, 4});
  auto m = Load();
  EXPECT_TRUE(m.ok()) << m.status();
}

TEST_F(StrictLoading, UnrecognizedKeysAreListedForTheLog) {
  Use("mixtral_f32");
  EditConfig([](json& c) { c["some_future_bookkeeping"] = 30.0; });
  auto m = Load();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->config().unrecognized_keys, std::vector<std::string>{"some_future_bookkeeping"});
}

// A key that changes the math in some family, left unread by this one: an error naming key, value
// and family when the value is not the neutral one; the neutral value loads.
TEST_F(StrictLoading, UnreadMathKeysWithEffectAreErrors) {
  struct Case {
    const char* fixture;
    const char* key;
    json value;
  };
  const Case cases[] = {{"mixtral_f32", "attention_bias", true},
                        {"mixtral_f32", "attn_logit_softcapping", 30.0},
                        {"mixtral_f32", "logit_scale", 0.5},
                        {"qwen3_moe_f32", "mlp_bias", true},
                        {"qwen3_moe_f32", "final_logit_softcapping", 15.0},
                        {"deepseek_v3_f32", "sliding_window", 4096},
                        {"glm4_moe_f32", "embedding_multiplier", 12.0}};
  for (const Case& c : cases) {
    Use(c.fixture);
    EditConfig([&](json& j) { j[c.key] = c.value; });
    auto m = Load();
    ASSERT_FALSE(m.ok()) << c.fixture << " " << c.key;
    const std::string msg(m.status().message());
    EXPECT_NE(msg.find(std::string("key '") + c.key + "' = " + c.value.dump()), std::string::npos) << msg;
    EXPECT_NE(msg.find("does not implement it"), std::string::npos) << msg;
  }
  for (const Case& c : {Case{"mixtral_f32", "attention_bias", false}, Case{"mixtral_f32", "hidden_act", "silu"},
                        Case{"qwen3_moe_f32", "final_logit_softcapping", nullptr},
                        Case{"deepseek_v3_f32", "sliding_window", nullptr}}) {
    Use(c.fixture);
    EditConfig([&](json& j) { j[c.key] = c.value; });
    auto m = Load();
    EXPECT_TRUE(m.ok()) << c.fixture << " " << c.key << ": " << m.status();
  }
}

TEST_F(StrictLoading, TiedModelShippingItsOwnHeadUsesIt) {
  Use("mixtral_tied_f32");
  int64_t vocab = 0, d = 0;
  EditConfig([&](json& c) {
    vocab = c["vocab_size"].get<int64_t>();
    d = c["hidden_size"].get<int64_t>();
  });
  AddTensor("lm_head.weight", {vocab, d});  // zeros: every logit 0
  auto m = Load();
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<float> logits;
  ASSERT_TRUE((*m)->ForwardSequence({1, 2, 3}, false, &logits).ok());
  for (float v : logits) ASSERT_EQ(v, 0.f);
}

// Kimi K3's wrapper: the text model's config nested in text_config, its tensors prefixed.
TEST_F(StrictLoading, K3WithoutTextConfigIsNamed) {
  UseK3();
  EditConfig([](json& c) { c.erase("text_config"); });
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("key 'text_config' is missing"), std::string::npos) << msg;
}

TEST_F(StrictLoading, K3WrapperDisagreeingWithTextConfigIsNamed) {
  UseK3();
  EditConfig([](json& c) { c["eos_token_id"] = 6001; });
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("key 'eos_token_id' disagrees with text_config.eos_token_id"), std::string::npos) << msg;
}

TEST_F(StrictLoading, K3TextKeyIsNamedWithItsPath) {
  UseK3();
  EditConfig([](json& c) { c["text_config"]["moe_router_activation_func"] = "softmax"; });
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("text_config.moe_router_activation_func"), std::string::npos) << msg;
  UseK3();
  EditConfig([](json& c) { c["text_config"]["linear_attn_config"]["kda_layers"] = {1, 2, 3}; });
  const std::string overlap = LoadError();
  EXPECT_NE(overlap.find("also a full-attention layer"), std::string::npos) << overlap;
}

TEST_F(StrictLoading, K3SkipsOnlyTheVisionTower) {
  UseK3();
  AddTensor("vision_tower.extra.weight", {4});
  EXPECT_TRUE(Load().ok());
  AddTensor("language_model.model.layers.0.mlp.extra.weight", {4});
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("'language_model.model.layers.0.mlp.extra.weight'"), std::string::npos) << msg;
}

TEST_F(StrictLoading, K3MissingAttnResTensorIsNamed) {
  UseK3();
  {
    SafetensorsWriter w;
    auto store = WeightStore::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    for (const auto& [n, e] : (*store)->Entries())
      if (n != "language_model.model.layers.3.mlp_res_proj.weight")
        w.AddRaw(n, e->shape, e->dtype, std::string(static_cast<const char*>(e->data), e->bytes));
    store->reset();
    ASSERT_TRUE(w.Write(dir_ + "/model.safetensors").ok());
  }
  const std::string msg = LoadError();
  EXPECT_NE(msg.find("language_model.model.layers.3.mlp_res_proj.weight"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ls
