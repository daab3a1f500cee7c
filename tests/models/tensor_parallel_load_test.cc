// Loading a tensor-parallel rank's part of a checkpoint (WeightBinder::GetPart, LoadModel with
// LoadOptions::tensor_parallel): a part holds exactly the rows or columns of the whole it should
// — float, FP8 block-scaled and packed INT4 alike — and what cannot be split is refused with an
// error naming the key or tensor and the group size. The group's numerics are tests/dist/
// tensor_parallel_test.cc's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/quantized_weight.h"
#include "models/families/load_config.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_binder.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace ls {
namespace {

std::vector<float> Values(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.rows * t.cols));
  for (int64_t r = 0; r < t.rows; ++r) DequantizeRow(t, r, out.data() + r * t.cols);
  return out;
}

// Every part of `name` ([rows, cols]) along `split` holds the whole's values at its place.
void ExpectPartsTile(const std::string& fixture, const std::string& name, int64_t rows, int64_t cols, Split split,
                     int64_t parts) {
  const std::string dir = testing::HfFixtureDir(fixture);
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  auto store = WeightStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  WeightBinder whole_binder(**store, config->quantization);
  const Tensor whole = whole_binder.Get(name, rows, cols);
  ASSERT_TRUE(whole_binder.status().ok()) << whole_binder.status();
  const std::vector<float> all = Values(whole);
  for (int64_t p = 0; p < parts; ++p) {
    WeightBinder b(**store, config->quantization);
    const Tensor part = b.GetPart(name, rows, cols, split, parts, p);
    ASSERT_TRUE(b.status().ok()) << b.status();
    ASSERT_EQ(part.quantized(), whole.quantized());
    const int64_t pr = split == Split::kRows ? rows / parts : rows, pc = split == Split::kCols ? cols / parts : cols;
    ASSERT_EQ(part.rows, pr);
    ASSERT_EQ(part.cols, pc);
    // The part's checkpoint bytes are its own share, not the whole's.
    EXPECT_LT(b.bytes_bound(), whole_binder.bytes_bound()) << name;
    const std::vector<float> got = Values(part);
    for (int64_t r = 0; r < pr; ++r)
      for (int64_t c = 0; c < pc; ++c) {
        const int64_t wr = split == Split::kRows ? p * pr + r : r, wc = split == Split::kCols ? p * pc + c : c;
        ASSERT_EQ(got[r * pc + c], all[wr * cols + wc]) << name << " part " << p << " at " << r << ", " << c;
      }
  }
}

TEST(TensorParallelLoad, FloatPartsAreTheWholesRowsAndColumns) {
  ExpectPartsTile("qwen3_moe_f32", "model.layers.0.self_attn.q_proj.weight", 96, 64, Split::kRows, 4);
  ExpectPartsTile("qwen3_moe_f32", "model.layers.0.self_attn.o_proj.weight", 64, 96, Split::kCols, 4);
  ExpectPartsTile("qwen2_moe_bf16", "model.layers.0.mlp.shared_expert.down_proj.weight", 64, 40, Split::kCols, 2);
}

TEST(TensorParallelLoad, BlockScaledFp8PartsKeepTheirScales) {
  ExpectPartsTile("glm4_moe_fp8_block32", "model.layers.1.self_attn.q_proj.weight", 64, 64, Split::kRows, 2);
  ExpectPartsTile("glm4_moe_fp8_block32", "model.layers.1.self_attn.o_proj.weight", 64, 64, Split::kCols, 2);
}

TEST(TensorParallelLoad, PackedInt4PartsCutBetweenGroups) {
  ExpectPartsTile("glm4_moe_int4", "model.layers.1.mlp.experts.0.gate_proj.weight", 32, 64, Split::kCols, 2);
  ExpectPartsTile("glm4_moe_int4", "model.layers.1.mlp.experts.0.gate_proj.weight", 32, 64, Split::kRows, 2);
}

// A copy of the FP8 fixture whose q_proj of layer 1 holds an FP8 NaN code at [40, 5]: in the second
// half of its rows, which only tensor-parallel rank 1 of 2 holds.
TEST(TensorParallelLoad, ARankReadsOnlyItsPartsCodes) {
  const std::string dir = testing::CopyToTempDir(testing::HfFixtureDir("glm4_moe_fp8_block32"), "tp_nan");
  const std::string file = dir + "/model.safetensors";
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
  }
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<unsigned char>(bytes[i]);
  const auto h = nlohmann::json::parse(bytes.substr(8, header));
  const std::string name = "model.layers.1.self_attn.q_proj.weight";
  const uint64_t at = 8 + header + h[name]["data_offsets"][0].get<uint64_t>() + 40 * 64 + 5;
  bytes[at] = static_cast<char>(0x7f);
  std::ofstream(file, std::ios::binary) << bytes;
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  auto store = WeightStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  WeightBinder first(**store, config->quantization), second(**store, config->quantization);
  EXPECT_FALSE(first.GetPart(name, 64, 64, Split::kRows, 2, 0).empty());
  EXPECT_TRUE(first.status().ok()) << first.status();
  EXPECT_TRUE(second.GetPart(name, 64, 64, Split::kRows, 2, 1).empty());
  EXPECT_NE(second.status().message().find("element [40, 5] is an FP8 NaN code"), std::string::npos) << second.status();
  WeightBinder columns(**store, config->quantization);  // by columns, rank 0 holds [40, 5]
  EXPECT_TRUE(columns.GetPart(name, 64, 64, Split::kCols, 2, 0).empty());
  std::filesystem::remove_all(dir);
}

absl::Status LoadPart(const std::string& dir, int32_t rank, int32_t size) {
  CpuBackend backend(1);
  LoadOptions options;
  options.tensor_parallel = {rank, size};
  return LoadModel(dir, &backend, options).status();
}

TEST(TensorParallelLoad, WhatCannotBeSplitIsRefusedByName) {
  const std::string qwen = testing::HfFixtureDir("qwen3_moe_f32");
  absl::Status s = LoadPart(qwen, 0, 3);
  EXPECT_NE(s.message().find("--tensor_parallel_size 3: num_attention_heads 4 is not a multiple"), std::string::npos)
      << s;
  s = LoadPart(qwen, 2, 2);
  EXPECT_NE(s.message().find("tensor-parallel rank 2 of a group of 2 is out of range"), std::string::npos) << s;
  s = LoadPart(testing::HfFixtureDir("deepseek_v3_f32"), 0, 3);
  EXPECT_NE(s.message().find("the MLA layers' num_attention_heads 4 is not a multiple of the group size"),
            std::string::npos)
      << s;
  s = LoadPart(testing::HfFixtureDir("qwen3_moe_f32"), 0, 128);
  EXPECT_NE(s.message().find("num_attention_heads 4 is not a multiple"), std::string::npos) << s;
  // Two key/value heads of 16 in halves would cut the 32-row FP8 scale blocks.
  s = LoadPart(testing::HfFixtureDir("glm4_moe_fp8_block32"), 0, 2);
  EXPECT_NE(s.message().find("k_proj.weight' cannot be split into 2 tensor-parallel parts along "
                             "its rows (32; each part would cut its scale blocks of 32)"),
            std::string::npos)
      << s;
  EXPECT_TRUE(LoadPart(qwen, 1, 2).ok());
  EXPECT_TRUE(LoadPart(qwen, 3, 4).ok());  // two key/value heads over four ranks: pairs share one
  EXPECT_TRUE(LoadPart(testing::HfFixtureDir("kimi_linear_f32"), 1, 2).ok());
}

// `dir`'s checkpoint with every safetensors file cut after its header: a shapes-only checkpoint.
std::string ShapesOnlyCopy(const std::string& dir, const std::string& tag) {
  const std::string out = testing::CopyToTempDir(dir, tag);
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    if (e.path().extension() != ".safetensors") continue;
    std::ifstream in(e.path(), std::ios::binary);
    unsigned char len[8];
    in.read(reinterpret_cast<char*>(len), 8);
    uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = header << 8 | len[i];
    in.close();
    std::filesystem::resize_file(e.path(), 8 + header);
  }
  return out;
}

TEST(TensorParallelLoad, AShapesOnlyCheckpointCountsWhatTheRealOneBinds) {
  for (const std::string& dir : {testing::K3FixtureDir("k3_tiny_mxfp4"), testing::HfFixtureDir("glm4_moe_f32")}) {
    const std::string shapes = ShapesOnlyCopy(dir, "shapes_only");
    CpuBackend backend(1);
    for (int32_t rank : {0, 1}) {
      LoadOptions real;
      real.routed_experts_on_host = true;  // the experts stay as bound, as on a rank of a group
      real.tensor_parallel = {rank, 2};
      LoadOptions counted = real;
      counted.shapes_only = true;
      auto want = LoadModel(dir, &backend, real);
      auto got = LoadModel(shapes, &backend, counted);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ((*got)->checkpoint_bytes_bound(), (*want)->checkpoint_bytes_bound()) << dir << " rank " << rank;
      EXPECT_EQ((*got)->routed_expert_bytes(), (*want)->routed_expert_bytes()) << dir;
      EXPECT_GT((*got)->routed_expert_bytes(), 0);
      std::vector<float> logits;
      const absl::Status st = (*got)->ForwardSequence({1, 2, 3}, false, &logits);
      EXPECT_NE(st.message().find("shapes only and cannot run"), std::string::npos) << st;
    }
    // Read in full, the cut files are refused by name.
    const absl::Status st = LoadModel(shapes, &backend).status();
    EXPECT_NE(st.message().find(".safetensors"), std::string::npos) << st;
    std::filesystem::remove_all(shapes);
  }
}

}  // namespace
}  // namespace ls
