// Test helpers.
#include "tests/test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "nlohmann/json.hpp"
#include "tools/npy.h"

namespace ls::testing {

std::string DataDir() { return LS_TEST_DATA_DIR; }

std::vector<std::string> FixtureNames() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(DataDir() + "/fixtures"))
    if (e.is_directory()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string FixtureDir(const std::string& name) { return DataDir() + "/fixtures/" + name; }

Golden LoadGolden(const std::string& dir) {
  Golden g;
  std::ifstream in(dir + "/golden.json");
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str());
  g.prompt_ids = j["prompt_ids"].get<std::vector<int32_t>>();
  g.decode_ids = j["decode_ids"].get<std::vector<int32_t>>();
  auto npy = ReadNpyF32(dir + "/golden_logits.npy");
  EXPECT_TRUE(npy.ok()) << npy.status();
  if (npy.ok()) {
    g.vocab = npy->shape.at(1);
    g.logits = std::move(npy->data);
  }
  return g;
}

float MaxAbsDiff(const float* a, const float* b, size_t n) {
  float m = 0.f;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

std::string CopyToTempDir(const std::string& dir, const std::string& tag) {
  namespace fs = std::filesystem;
  const fs::path out = fs::temp_directory_path() / ("ls_test_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(out);
  fs::create_directories(out);
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) fs::copy_file(e.path(), out / e.path().filename());
  return out.string();
}

std::vector<float> RunGolden(StableLatentMoe& model, const Golden& g, const std::vector<int>& chunks) {
  const int32_t total = static_cast<int32_t>(g.prompt_ids.size() + g.decode_ids.size());
  KvCache cache(model.backend(), model.config(), 8, 8);
  StepSequence seq;
  // A scrambled block table, so logical and physical order differ.
  seq.block_table = {5, 2, 7, 0, 3, 6, 1, 4};
  EXPECT_GE(static_cast<int32_t>(seq.block_table.size()) * 8, total);
  std::vector<float> all, logits;
  int32_t pos = 0;
  for (int c : chunks) {
    StepBatch b;
    b.tokens.assign(g.prompt_ids.begin() + pos, g.prompt_ids.begin() + pos + c);
    seq.start_pos = pos;
    seq.num_tokens = c;
    seq.all_logits = true;
    b.seqs = {seq};
    EXPECT_TRUE(model.Forward(b, cache, &logits).ok());
    all.insert(all.end(), logits.begin(), logits.end());
    pos += c;
  }
  for (int32_t id : g.decode_ids) {
    StepBatch b;
    b.tokens = {id};
    seq.start_pos = pos++;
    seq.num_tokens = 1;
    seq.all_logits = false;
    b.seqs = {seq};
    EXPECT_TRUE(model.Forward(b, cache, &logits).ok());
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

}  // namespace ls::testing
