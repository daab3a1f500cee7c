// Model-file faults: every truncation point of a small safetensors file, and random byte flips in
// its header, give an error (or, for a flip that leaves a consistent file, a clean load) — never a
// crash. Runs the loader on real files, as a server would.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "models/loader/safetensors_file.h"
#include "models/loader/safetensors_writer.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/registry.h"
#include "tests/test_util.h"

namespace ls {
namespace {

// A path in the temporary directory of this process alone: ctest runs the tests of this file as
// concurrent processes, which must not write each other's files.
std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ls_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string SmallFile() {
  SafetensorsWriter w;
  w.Add("a", {2, 3}, {1, 2, 3, 4, 5, 6}, DType::kF32);
  w.Add("b.weight", {4}, {1, 2, 3, 4}, DType::kBF16);
  w.Add("c", {3, 1}, {7, 8, 9}, DType::kF16);
  const std::string path = TempPath("small.safetensors");
  EXPECT_TRUE(w.Write(path).ok());
  std::stringstream ss;
  ss << std::ifstream(path, std::ios::binary).rdbuf();
  std::filesystem::remove(path);
  return ss.str();
}

TEST(ModelFileFaults, EveryTruncationPointIsAnErrorNotACrash) {
  const std::string file = SmallFile();
  const std::string path = TempPath("trunc.safetensors");
  for (size_t n = 0; n < file.size(); ++n) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(file.data(), static_cast<std::streamsize>(n));
    auto f = SafetensorsFile::Open(path);
    ASSERT_FALSE(f.ok()) << "truncated to " << n << " of " << file.size() << " bytes";
    EXPECT_NE(f.status().message().find(path), std::string::npos);
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << file;
  EXPECT_TRUE(SafetensorsFile::Open(path).ok());
  std::filesystem::remove(path);
}

TEST(ModelFileFaults, RandomHeaderByteFlipsNeverCrash) {
  const std::string file = SmallFile();
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | static_cast<unsigned char>(file[i]);
  std::mt19937 rng(99);
  int errors = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string f = file;
    const int flips = 1 + rng() % 4;
    for (int k = 0; k < flips; ++k) f[rng() % (8 + header_len)] ^= static_cast<char>(1 + rng() % 255);
    auto entries = SafetensorsFile::ParseHeader(reinterpret_cast<const unsigned char*>(f.data()), f.size(), "flipped");
    if (!entries.ok()) {
      ++errors;
      EXPECT_EQ(entries.status().message().rfind("flipped: ", 0), 0u) << entries.status();
      continue;
    }
    for (const auto& [name, e] : *entries) {  // what parses must be inside the file
      const auto* p = static_cast<const unsigned char*>(e.data);
      ASSERT_GE(p, reinterpret_cast<const unsigned char*>(f.data()));
      ASSERT_LE(p + e.bytes, reinterpret_cast<const unsigned char*>(f.data()) + f.size());
    }
  }
  EXPECT_GT(errors, 2000);
}

TEST(ModelFileFaults, TruncatedFixtureModelFailsToLoadCleanly) {
  const std::string dir = testing::CopyToTempDir(testing::FixtureDir("plain_softmax_silu_tied_f32"), "trunc_model");
  const std::string weights = dir + "/model.safetensors";
  std::ifstream in(weights, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string file = ss.str();
  in.close();
  std::mt19937 rng(5);
  CpuBackend backend(1);
  for (int i = 0; i < 60; ++i) {
    const size_t n = rng() % file.size();
    std::ofstream(weights, std::ios::binary | std::ios::trunc).write(file.data(), static_cast<std::streamsize>(n));
    EXPECT_FALSE(LoadModel(dir, &backend).ok()) << n;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ls
