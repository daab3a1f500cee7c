// Workload generation and loading.
#include "tools/bench/workload.h"

#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ls::bench {

std::vector<BenchRequest> SyntheticWorkload(const SyntheticSpec& s, int64_t count) {
  std::mt19937_64 rng(s.seed);
  auto len = [&](int32_t mean) {
    const int32_t lo = std::max(1, static_cast<int32_t>(mean * (1 - s.range_ratio)));
    const int32_t hi = std::max(lo, static_cast<int32_t>(mean * (1 + s.range_ratio)));
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  std::vector<BenchRequest> out(count);
  for (auto& r : out) {
    const int32_t n = len(s.input_len);
    std::uniform_int_distribution<int32_t> id(10, std::max(11, s.vocab - 1));
    for (int32_t i = 0; i < n; ++i) r.prompt_ids.push_back(id(rng));
    r.max_tokens = len(s.output_len);
  }
  return out;
}

absl::StatusOr<std::vector<BenchRequest>> LoadJsonl(const std::string& path, int32_t default_max_tokens) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::vector<BenchRequest> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": not a JSON object"));
    BenchRequest r;
    r.max_tokens = j.value("max_tokens", default_max_tokens);
    if (j.contains("prompt") && j["prompt"].is_string()) {
      r.prompt = j["prompt"];
    } else if (j.contains("prompt_ids") && j["prompt_ids"].is_array()) {
      r.prompt_ids = j["prompt_ids"].get<std::vector<int32_t>>();
    } else if (j.contains("messages") && j["messages"].is_array()) {
      r.messages_json = j["messages"].dump();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": needs \"prompt\", \"prompt_ids\" or \"messages\""));
    }
    out.push_back(std::move(r));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no requests"));
  return out;
}

}  // namespace ls::bench
