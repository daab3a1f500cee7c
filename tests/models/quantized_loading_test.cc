// Quantized checkpoints are read strictly: a quantization method, format or setting the server does
// not implement (activation or KV-cache quantization, static FP8 activations, per-tensor FP8) is a
// load error naming key and value; a weight whose parts are missing, misshapen or hold NaN codes or
// scales (FP8 0x7f, E8M0 255), that disagree with `weight_shape`, or that the ignore list says is
// unquantized is an error naming the tensor; --quantization on an already quantized checkpoint is
// refused. Each case edits a copy of a fixture written by models/reference/hf_fixtures.py.
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

class QuantizedLoading : public ::testing::Test {
 protected:
  void Use(const std::string& fixture) {
    dir_ = testing::CopyToTempDir(testing::HfFixtureDir(fixture),
                                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  void EditConfig(const std::function<void(json&)>& edit) {
    std::ifstream in(dir_ + "/config.json");
    std::stringstream ss;
    ss << in.rdbuf();
    json c = json::parse(ss.str());
    edit(c["quantization_config"]);
    std::ofstream(dir_ + "/config.json") << c.dump(2);
  }
  // Rewrites the weights, letting `edit` change any tensor's bytes (or drop it: return false).
  void EditTensors(const std::function<bool(const std::string&, std::string* bytes)>& edit) {
    SafetensorsWriter w;
    {
      auto store = WeightStore::Open(dir_);
      ASSERT_TRUE(store.ok()) << store.status();
      for (const auto& [n, e] : (*store)->Entries()) {
        std::string bytes(static_cast<const char*>(e->data), e->bytes);
        if (edit(n, &bytes)) w.AddRaw(n, e->shape, e->dtype, std::move(bytes));
      }
    }
    ASSERT_TRUE(w.Write(dir_ + "/model.safetensors").ok());
  }
  std::string LoadError(const LoadOptions& options = {}) {
    auto m = LoadModel(dir_, &backend_, options);
    EXPECT_FALSE(m.ok()) << "expected a load error";
    return m.ok() ? "" : std::string(m.status().message());
  }
  void ExpectError(const std::string& fragment, const LoadOptions& options = {}) {
    const std::string msg = LoadError(options);
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  }

  CpuBackend backend_{1};
  std::string dir_;
};

constexpr char kExpert[] = "model.layers.1.mlp.experts.0.gate_proj";

TEST_F(QuantizedLoading, UnsupportedMethodIsNamed) {
  Use("qwen3_moe_fp8");
  EditConfig([](json& q) { q["quant_method"] = "awq"; });
  ExpectError("key 'quantization_config.quant_method' = \"awq\" is not supported");
}

TEST_F(QuantizedLoading, StaticFp8ActivationsAreRefused) {
  Use("qwen3_moe_fp8");
  EditConfig([](json& q) { q["activation_scheme"] = "static"; });
  ExpectError("key 'quantization_config.activation_scheme' = \"static\" is not supported");
}

TEST_F(QuantizedLoading, PerTensorFp8IsRefused) {
  Use("qwen3_moe_fp8");
  EditConfig([](json& q) { q.erase("weight_block_size"); });
  ExpectError("per-tensor FP8 scales are not supported");
}

TEST_F(QuantizedLoading, ActivationQuantizationIsRefusedByName) {
  Use("glm4_moe_int4");
  EditConfig([](json& q) {
    q["config_groups"]["group_0"]["input_activations"] = {{"num_bits", 8}, {"type", "int"}, {"dynamic", true}};
  });
  ExpectError("key 'quantization_config.config_groups.group_0.input_activations'");
}

TEST_F(QuantizedLoading, KvCacheQuantizationIsRefused) {
  Use("glm4_moe_int4");
  EditConfig([](json& q) { q["kv_cache_scheme"] = {{"num_bits", 8}, {"type", "float"}}; });
  ExpectError("key 'quantization_config.kv_cache_scheme'");
}

TEST_F(QuantizedLoading, OtherFormatsAndBitWidthsAreRefused) {
  Use("glm4_moe_int4");
  EditConfig([](json& q) { q["config_groups"]["group_0"]["weights"]["num_bits"] = 8; });
  ExpectError("key 'quantization_config.config_groups.group_0.weights.num_bits' = 8 is not supported");
  EditConfig([](json& q) { q["format"] = "marlin-24"; });
  ExpectError("key 'quantization_config.format' = \"marlin-24\" is not supported");
}

TEST_F(QuantizedLoading, IgnoredModuleStoredPackedIsAnError) {
  Use("glm4_moe_int4");
  EditConfig([](json& q) { q["ignore"].push_back("re:.*experts\\.0\\..*"); });
  ExpectError("module 'model.layers.1.mlp.experts.0.gate_proj' is in quantization_config.ignore");
}

TEST_F(QuantizedLoading, TargetedModuleStoredUnquantizedIsAnError) {
  Use("qwen3_moe_mxfp4");
  EditConfig([](json& q) { q["config_groups"]["group_0"]["targets"].push_back("re:.*self_attn\\.o_proj"); });
  ExpectError("targets module 'model.layers.0.self_attn.o_proj' but the checkpoint stores it unquantized");
}

TEST_F(QuantizedLoading, MissingFp8ScalesAreNamed) {
  Use("qwen3_moe_fp8");
  EditTensors([](const std::string& n, std::string*) { return n != std::string(kExpert) + ".weight_scale_inv"; });
  ExpectError(std::string("'") + kExpert + ".weight': stored as F8_E4M3, but its block scales");
}

TEST_F(QuantizedLoading, Fp8NanCodeIsRefused) {
  Use("qwen3_moe_fp8");
  EditTensors([](const std::string& n, std::string* b) {
    if (n == std::string(kExpert) + ".weight") (*b)[3] = static_cast<char>(0xff);
    return true;
  });
  ExpectError("element [0, 3] is an FP8 NaN code");
}

TEST_F(QuantizedLoading, E8M0NanScaleIsRefused) {
  Use("qwen3_moe_mxfp4");
  EditTensors([](const std::string& n, std::string* b) {
    if (n == std::string(kExpert) + ".weight_scale") (*b)[1] = static_cast<char>(0xff);
    return true;
  });
  ExpectError("scale 1 of '" + std::string(kExpert) + ".weight_scale' is not a finite number (E8M0 255 is NaN)");
}

TEST_F(QuantizedLoading, WeightShapeThatDisagreesIsNamed) {
  Use("glm4_moe_int4");
  EditTensors([](const std::string& n, std::string* b) {
    if (n == std::string(kExpert) + ".weight_shape") (*b)[0] = 17;  // rows (int64, little-endian)
    return true;
  });
  ExpectError("'" + std::string(kExpert) + ".weight_shape' says [17, 64]");
}

TEST_F(QuantizedLoading, MissingZeroPointsOfAnAsymmetricSchemeAreNamed) {
  Use("qwen3_moe_int4_asym_f32");
  EditTensors([](const std::string& n, std::string*) { return n != std::string(kExpert) + ".weight_zero_point"; });
  ExpectError("missing tensor '" + std::string(kExpert) + ".weight_zero_point'");
}

TEST_F(QuantizedLoading, OnlineQuantizationOfAQuantizedCheckpointIsRefused) {
  Use("qwen3_moe_fp8");
  LoadOptions o;
  o.quantization = QuantScheme::kInt4;
  ExpectError("--quantization int4 needs a float checkpoint; this one is quantized already (fp8 e4m3, 128 x 128", o);
}

}  // namespace
}  // namespace ls
