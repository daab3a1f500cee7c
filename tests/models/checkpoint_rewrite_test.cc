// RewriteCheckpoint keeps a checkpoint's layout: a single file stays one file, a sharded one keeps
// its shards and index, untouched shards are links to the originals, replaced tensors keep their
// dtype and new ones join the shard of their module and the index; the result loads and serves.
#include "models/loader/checkpoint_rewrite.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/dtype.h"
#include "models/loader/safetensors_writer.h"
#include "models/loader/weight_store.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace ls {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kBias = "language_model.model.layers.4.block_sparse_moe.gate.e_score_correction_bias";

class CheckpointRewrite : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    in_ = testing::CopyToTempDir(testing::K3FixtureDir("k3_tiny_bf16"), name + "_in");
    out_ = (fs::temp_directory_path() / ("ls_test_" + name + "_out_" + std::to_string(::getpid()))).string();
    fs::remove_all(out_);
  }
  void TearDown() override {
    fs::remove_all(in_);
    fs::remove_all(out_);
  }
  // Splits model.safetensors into two shards (layers up to 2 and the vision tower first) with an
  // index, dropping the tensors named in `drop`.
  void Shard(const std::set<std::string>& drop = {}) {
    SafetensorsWriter a, b;
    json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
    {
      auto store = WeightStore::Open(in_);
      ASSERT_TRUE(store.ok()) << store.status();
      for (const auto& [n, e] : (*store)->Entries()) {
        if (drop.count(n)) continue;
        const bool first = n.rfind("vision_tower.", 0) == 0 || n.find(".layers.0.") != std::string::npos ||
                           n.find(".layers.1.") != std::string::npos || n.find(".layers.2.") != std::string::npos;
        (first ? a : b).AddRaw(n, e->shape, e->dtype, std::string(static_cast<const char*>(e->data), e->bytes));
        index["weight_map"][n] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
      }
    }
    ASSERT_TRUE(a.Write(in_ + "/model-00001-of-00002.safetensors").ok());
    ASSERT_TRUE(b.Write(in_ + "/model-00002-of-00002.safetensors").ok());
    fs::remove(in_ + "/model.safetensors");
    std::ofstream(in_ + "/model.safetensors.index.json") << index.dump(2);
  }
  std::vector<float> Values(const std::string& dir, const std::string& name) {
    auto store = WeightStore::Open(dir);
    EXPECT_TRUE(store.ok()) << store.status();
    std::vector<float> v;
    if (!store.ok()) return v;
    const TensorEntry* e = (*store)->Entry(name);
    EXPECT_NE(e, nullptr) << name;
    if (!e) return v;
    for (size_t i = 0; i < e->bytes / DTypeSize(e->dtype); ++i) v.push_back(LoadAsF32(e->data, e->dtype, i));
    return v;
  }
  json Index(const std::string& dir) {
    std::ifstream in(dir + "/model.safetensors.index.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return json::parse(ss.str());
  }

  std::string in_, out_;
};

std::vector<float> Ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>(i) - 1.f;
  return v;
}

TEST_F(CheckpointRewrite, SingleFileKeepsEveryOtherTensorAndTheDtype) {
  RewriteStats st;
  ASSERT_TRUE(RewriteCheckpoint(in_, out_, {{kBias, Ramp(8)}}, &st).ok());
  EXPECT_EQ(st.shards_rewritten, 1);
  EXPECT_TRUE(fs::exists(out_ + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(out_ + "/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(out_ + "/tiktoken.model") && fs::exists(out_ + "/config.json"));
  EXPECT_EQ(Values(out_, kBias), Ramp(8));
  auto a = WeightStore::Open(in_), b = WeightStore::Open(out_);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*b)->Entry(kBias)->dtype, (*a)->Entry(kBias)->dtype);
  for (const auto& [n, e] : (*a)->Entries()) {
    const TensorEntry* f = (*b)->Entry(n);
    ASSERT_NE(f, nullptr) << n;
    if (n != kBias) {
      EXPECT_EQ(std::memcmp(e->data, f->data, e->bytes), 0) << n;
    }
  }
}

TEST_F(CheckpointRewrite, ShardsStayShardsAndUntouchedOnesAreLinked) {
  Shard();
  RewriteStats st;
  ASSERT_TRUE(RewriteCheckpoint(in_, out_, {{kBias, Ramp(8)}}, &st).ok());
  EXPECT_EQ(st.shards_rewritten, 1);
  EXPECT_EQ(st.shards_linked, 1);
  EXPECT_FALSE(fs::exists(out_ + "/model.safetensors"));
  EXPECT_TRUE(fs::equivalent(in_ + "/model-00001-of-00002.safetensors", out_ + "/model-00001-of-00002.safetensors"));
  EXPECT_FALSE(fs::equivalent(in_ + "/model-00002-of-00002.safetensors", out_ + "/model-00002-of-00002.safetensors"));
  EXPECT_EQ(Index(out_), Index(in_));
  EXPECT_EQ(Values(out_, kBias), Ramp(8));
  EXPECT_EQ(Values(out_, "language_model.lm_head.weight"), Values(in_, "language_model.lm_head.weight"));
}

TEST_F(CheckpointRewrite, NewTensorJoinsItsModulesShardAndTheIndex) {
  Shard({kBias});
  ASSERT_TRUE(RewriteCheckpoint(in_, out_, {{kBias, Ramp(8)}}).ok());
  EXPECT_EQ(Index(out_)["weight_map"][kBias], "model-00002-of-00002.safetensors");
  EXPECT_EQ(Values(out_, kBias), Ramp(8));
  auto b = WeightStore::Open(out_);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->Entry(kBias)->dtype, DType::kF32);
}

TEST_F(CheckpointRewrite, RefusesItsOwnInputAndAWrongLength) {
  EXPECT_FALSE(RewriteCheckpoint(in_, in_, {{kBias, Ramp(8)}}).ok());
  const absl::Status s = RewriteCheckpoint(in_, out_, {{kBias, Ramp(5)}});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("does not hold 5 values"), std::string::npos) << s;
}

}  // namespace
}  // namespace ls
