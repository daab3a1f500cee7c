// Helpers shared by the model tests: fixture paths, golden data, and a one-sequence runner.
#pragma once

#include <string>
#include <vector>

#include "models/registry.h"

namespace ls::testing {

std::string DataDir();
std::vector<std::string> FixtureNames();  // every directory under tests/data/fixtures
std::string FixtureDir(const std::string& name);
// The checkpoints written by transformers (tests/data/hf, models/reference/hf_fixtures.py).
std::vector<std::string> HfFixtureNames();
std::string HfFixtureDir(const std::string& name);
// Kimi K3's checkpoints (tests/data/k3, models/reference/k3_fixtures.py).
std::vector<std::string> K3FixtureNames();
std::string K3FixtureDir(const std::string& name);
// The directory of a test parameter naming a fixture: "hf/NAME", "k3/NAME" or NAME (our format).
std::string FixtureParamDir(const std::string& param);

struct Golden {
  std::vector<int32_t> prompt_ids;  // [32]
  std::vector<int32_t> decode_ids;  // [16]
  std::vector<float> logits;        // [48, V]
  int64_t vocab = 0;
};
Golden LoadGolden(const std::string& dir);

// Runs a golden's prompt as prefill chunks of the given sizes over a scrambled block table, then
// its decode ids one step at a time; returns all rows of logits ([prompt + decode, V]).
std::vector<float> RunGolden(Model& model, const Golden& g, const std::vector<int>& chunks);

// How well two sets of logits rows ([rows, vocab]) agree: the worst row's relative L2 error
// ‖got − want‖ / ‖want‖ (1e30 when got holds a non-finite value) and the share of rows whose
// largest logit is at the same index.
struct LogitsAgreement {
  double worst_relative_error = 0;
  double top_agreement = 0;
};
LogitsAgreement CompareLogits(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab);

// Max |a - b| over two equally long arrays.
float MaxAbsDiff(const float* a, const float* b, size_t n);

// Copies a directory's files into a fresh temporary directory and returns its path.
std::string CopyToTempDir(const std::string& dir, const std::string& tag);

}  // namespace ls::testing
