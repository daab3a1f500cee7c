// GenerationDefaults: generation_config.json read strictly (errors name the file and key), and
// its values applied only where a request left a field unset.
#include "engine/generation_defaults.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace ls {
namespace {

class GenerationDefaultsTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("gen_defaults_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir);
    dir_ = dir.string();
    std::ofstream(dir / "generation_config.json") << text;
    return (dir / "generation_config.json").string();
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string dir_;
};

TEST_F(GenerationDefaultsTest, ReadsTheSamplingFieldsAndEveryEosId) {
  Write(R"({"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.0,
            "repetition_penalty": 1.05, "max_new_tokens": 512, "eos_token_id": [151645, 151643]})");
  auto d = GenerationDefaults::FromModelDir(dir_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FLOAT_EQ(*d->temperature, 0.6f);
  EXPECT_FLOAT_EQ(*d->top_p, 0.95f);
  EXPECT_EQ(*d->top_k, 20);
  EXPECT_FLOAT_EQ(*d->repetition_penalty, 1.05f);
  EXPECT_EQ(*d->max_tokens, 512);
  EXPECT_EQ(d->eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(d->Describe(), R"("eos_token_ids":[151645,151643],"max_tokens":512,"min_p":0.0,"repetition_penalty":1.05,)"
                           R"("temperature":0.6,"top_k":20,"top_p":0.95)");
}

TEST_F(GenerationDefaultsTest, NoFileIsNoDefaults) {
  auto d = GenerationDefaults::FromModelDir("/nonexistent-model-dir");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->empty());
}

TEST_F(GenerationDefaultsTest, BadValuesNameTheFileAndKey) {
  for (const char* text : {R"({"temperature": "hot"})", R"({"top_k": 2.5})", R"({"eos_token_id": [-1]})",
                           R"({"temperature": -1})", R"({"max_new_tokens": 0})", "[1]", "{"}) {
    const std::string path = Write(text);
    auto d = GenerationDefaults::FromFile(path);
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_NE(d.status().message().find(path), std::string::npos) << d.status();
  }
  auto d = GenerationDefaults::FromFile(Write(R"({"top_k": 2.5})"));
  EXPECT_NE(d.status().message().find("'top_k'"), std::string::npos) << d.status();
}

TEST_F(GenerationDefaultsTest, OnlyFieldsTheRequestLeftUnsetTakeTheDefaults) {
  GenerationDefaults d;
  d.temperature = 0.6f;
  d.top_p = 0.9f;
  d.top_k = 20;
  d.repetition_penalty = 1.1f;
  d.eos_token_ids = {7, 9};
  SamplingParams p;
  p.temperature = 0.0f;
  SampledFields given;
  given.temperature = true;
  ApplyGenerationDefaults(d, given, /*model_eos=*/{7}, &p);
  EXPECT_EQ(p.temperature, 0.0f) << "the request's temperature stays";
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_EQ(p.stop_token_ids, std::vector<int32_t>{9}) << "eos ids the model lacks stop generation";
  SamplingParams ignoring;
  ignoring.ignore_eos = true;
  ApplyGenerationDefaults(d, {}, {7}, &ignoring);
  EXPECT_TRUE(ignoring.stop_token_ids.empty());
}

}  // namespace
}  // namespace ls
