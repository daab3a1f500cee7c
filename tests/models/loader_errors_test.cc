// Broken model files give a clear error naming the file and the problem, never a crash:
// one test per kind of damage, each made from a copy of a good fixture.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace ls {
namespace {

using json = nlohmann::json;
constexpr const char* kFixture = "latent_sigmoid_silu_norm_f32";

std::string FileText(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void WriteFile(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// The safetensors file split into its header JSON and data bytes.
struct Parts {
  json header;
  std::string data;
};
Parts Split(const std::string& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(file[i]);
  return {json::parse(file.substr(8, n)), file.substr(8 + n)};
}
std::string Join(const Parts& p) {
  std::string h = p.header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + p.data;
}

class LoaderErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::CopyToTempDir(testing::FixtureDir(kFixture), ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string weights() const { return dir_ + "/model.safetensors"; }
  std::string config() const { return dir_ + "/config.json"; }
  // Loads and expects failure; returns the message.
  std::string LoadError() {
    CpuBackend backend(1);
    auto m = LoadModel(dir_, &backend);
    EXPECT_FALSE(m.ok());
    return m.ok() ? "" : std::string(m.status().message());
  }
  void EditHeader(const std::function<void(json&)>& edit) {
    Parts p = Split(FileText(weights()));
    edit(p.header);
    WriteFile(weights(), Join(p));
  }
  void EditConfig(const std::function<void(json&)>& edit) {
    json c = json::parse(FileText(config()));
    edit(c);
    WriteFile(config(), c.dump());
  }
  std::string dir_;
};

TEST_F(LoaderErrors, TruncatedFileNamesFileAndRange) {
  std::string f = FileText(weights());
  WriteFile(weights(), f.substr(0, f.size() - 100));
  std::string msg = LoadError();
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
}

TEST_F(LoaderErrors, TruncatedInsideHeader) {
  WriteFile(weights(), FileText(weights()).substr(0, 50));
  std::string msg = LoadError();
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST_F(LoaderErrors, HeaderOffsetsOutOfRange) {
  EditHeader([](json& h) { h["model.norm.weight"]["data_offsets"][1] = 1u << 30; });
  std::string msg = LoadError();
  EXPECT_NE(msg.find("model.norm.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
}

TEST_F(LoaderErrors, UnsupportedDtype) {
  EditHeader([](json& h) { h["model.norm.weight"]["dtype"] = "F64"; });
  std::string msg = LoadError();
  EXPECT_NE(msg.find("unsupported dtype F64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.norm.weight"), std::string::npos) << msg;
}

TEST_F(LoaderErrors, IntegerTensorWithoutQuantizationConfigIsRefused) {
  // I32 is a dtype the reader accepts (packed weights), but not for a norm weight of a plain model.
  EditHeader([](json& h) { h["model.norm.weight"]["dtype"] = "I32"; });
  std::string msg = LoadError();
  EXPECT_NE(msg.find("'model.norm.weight': stored as I32"), std::string::npos) << msg;
}

TEST_F(LoaderErrors, DtypeNotMatchingByteRange) {
  EditHeader([](json& h) { h["model.norm.weight"]["dtype"] = "BF16"; });
  std::string msg = LoadError();
  EXPECT_NE(msg.find("does not match shape"), std::string::npos) << msg;
}

TEST_F(LoaderErrors, ShapeNotMatchingConfig) {
  EditConfig([](json& c) { c["moe_intermediate_size"] = 48; });
  std::string msg = LoadError();
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("config.json implies"), std::string::npos) << msg;
}

TEST_F(LoaderErrors, MissingTensor) {
  EditHeader([](json& h) { h.erase("model.layers.1.mlp.experts.3.up_proj.weight"); });
  std::string msg = LoadError();
  EXPECT_NE(msg.find("missing tensor 'model.layers.1.mlp.experts.3.up_proj.weight'"), std::string::npos) << msg;
}

TEST_F(LoaderErrors, InvalidConfigJson) {
  WriteFile(config(), "{\"hidden_size\": 64,");
  std::string msg = LoadError();
  EXPECT_NE(msg.find("config.json: invalid JSON"), std::string::npos) << msg;
}

TEST_F(LoaderErrors, InvalidHeaderJson) {
  std::string f = FileText(weights());
  f[9] = '#';
  WriteFile(weights(), f);
  std::string msg = LoadError();
  EXPECT_NE(msg.find("header is not valid JSON"), std::string::npos) << msg;
}

TEST_F(LoaderErrors, MissingConfigKey) {
  EditConfig([](json& c) { c.erase("hidden_size"); });
  std::string msg = LoadError();
  EXPECT_NE(msg.find("config.json: missing required key 'hidden_size'"), std::string::npos) << msg;
}

TEST_F(LoaderErrors, MissingWeightsFile) {
  std::filesystem::remove(weights());
  std::string msg = LoadError();
  EXPECT_NE(msg.find("no model.safetensors"), std::string::npos) << msg;
}

TEST_F(LoaderErrors, OverlappingTensors) {
  EditHeader([](json& h) {
    auto a = h["model.norm.weight"]["data_offsets"];
    h["model.layers.0.input_layernorm.weight"]["data_offsets"] = a;
  });
  std::string msg = LoadError();
  EXPECT_NE(msg.find("overlap"), std::string::npos) << msg;
}

TEST(LoaderErrorsSharded, ShardMissingListedTensor) {
  const std::string dir = testing::CopyToTempDir(testing::FixtureDir("plain_sigmoid_silu_shared_hd24_bf16_sharded"), "shard");
  json index = json::parse(FileText(dir + "/model.safetensors.index.json"));
  index["weight_map"]["model.layers.0.mlp.extra.weight"] = index["weight_map"]["model.norm.weight"];
  WriteFile(dir + "/model.safetensors.index.json", index.dump());
  CpuBackend backend(1);
  auto m = LoadModel(dir, &backend);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("model.layers.0.mlp.extra.weight"), std::string::npos) << m.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ls
