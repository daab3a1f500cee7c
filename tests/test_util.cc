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

namespace {

std::vector<std::string> Subdirectories(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_directory()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::vector<std::string> FixtureNames() { return Subdirectories(DataDir() + "/fixtures"); }
std::string FixtureDir(const std::string& name) { return DataDir() + "/fixtures/" + name; }
std::vector<std::string> HfFixtureNames() { return Subdirectories(DataDir() + "/hf"); }
std::string HfFixtureDir(const std::string& name) { return DataDir() + "/hf/" + name; }
std::vector<std::string> K3FixtureNames() { return Subdirectories(DataDir() + "/k3"); }
std::string K3FixtureDir(const std::string& name) { return DataDir() + "/k3/" + name; }
std::string FixtureParamDir(const std::string& param) {
  if (param.rfind("hf/", 0) == 0) return HfFixtureDir(param.substr(3));
  if (param.rfind("k3/", 0) == 0) return K3FixtureDir(param.substr(3));
  return FixtureDir(param);
}

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

LogitsAgreement CompareLogits(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab) {
  LogitsAgreement a;
  const size_t rows = want.size() / static_cast<size_t>(vocab);
  size_t same_top = 0;
  for (size_t r = 0; r < rows; ++r) {
    double diff = 0, norm = 0;
    size_t top_got = 0, top_want = 0;
    for (size_t v = 0; v < static_cast<size_t>(vocab); ++v) {
      const size_t i = r * static_cast<size_t>(vocab) + v;
      const double g = got[i], w = want[i];
      if (!std::isfinite(g)) return {1e30, 0};
      diff += (g - w) * (g - w);
      norm += w * w;
      if (got[i] > got[r * static_cast<size_t>(vocab) + top_got]) top_got = v;
      if (want[i] > want[r * static_cast<size_t>(vocab) + top_want]) top_want = v;
    }
    a.worst_relative_error = std::max(a.worst_relative_error, std::sqrt(diff / std::max(norm, 1e-30)));
    same_top += top_got == top_want;
  }
  a.top_agreement = rows == 0 ? 1.0 : static_cast<double>(same_top) / static_cast<double>(rows);
  return a;
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

std::vector<float> RunGolden(Model& model, const Golden& g, const std::vector<int>& chunks) {
  const int32_t total = static_cast<int32_t>(g.prompt_ids.size() + g.decode_ids.size());
  KvCache cache(model.backend(), model.kv_layout(), 8, 8, DType::kF32, /*num_state_slots=*/1);
  StepSequence seq;
  seq.state_slot = 0;
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
