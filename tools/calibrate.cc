// latentserve-calibrate: re-fits a model's router biases on a prompt set with the Quantile
// Balancing estimator, layer by layer, and writes a model directory with the new biases (every
// other file copied, every other tensor copied byte for byte). Prints the per-layer balance
// (max/mean tokens per expert) before and after as JSON.
//   --prompts FILE: text, one prompt per line (needs the model's tokenizer), or a .json file
//   {"sequences": [[ids...], ...]}.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tools/cli_usage.h"
#include "absl/strings/str_cat.h"
#include "engine/calibration.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/loader/safetensors_writer.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, model, "", "model directory");
ABSL_FLAG(std::string, prompts, "", "prompt file: text lines, or .json with {\"sequences\": [[ids]]}");
ABSL_FLAG(std::string, out, "", "output model directory (created; must differ from --model)");
ABSL_FLAG(int32_t, iters, 10, "estimator updates per layer");
ABSL_FLAG(int32_t, num_bins, 1024, "histogram bins");
ABSL_FLAG(double, range_lo, -1.5, "histogram range, low end");
ABSL_FLAG(double, range_hi, 1.5, "histogram range, high end");
ABSL_FLAG(int32_t, threads, 0, "CPU threads (0: all)");

namespace {

namespace fs = std::filesystem;

int Fail(const std::string& m) {
  std::fprintf(stderr, "latentserve-calibrate: %s\n", m.c_str());
  return 1;
}

absl::StatusOr<std::vector<std::vector<int32_t>>> ReadPrompts(const std::string& path, const std::string& model_dir) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<std::vector<int32_t>> seqs;
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") {
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("sequences") || !j["sequences"].is_array())
      return absl::InvalidArgumentError(absl::StrCat(path, ": expected {\"sequences\": [[ids...], ...]}"));
    for (const auto& s : j["sequences"]) {
      if (!s.is_array()) return absl::InvalidArgumentError(absl::StrCat(path, ": each sequence must be a list of ids"));
      std::vector<int32_t> ids;
      for (const auto& v : s) {
        if (!v.is_number_integer()) return absl::InvalidArgumentError(absl::StrCat(path, ": ids must be integers"));
        ids.push_back(v.get<int32_t>());
      }
      seqs.push_back(std::move(ids));
    }
    return seqs;
  }
  auto tok = ls::tok::Tokenizer::ForModelDir(model_dir);
  if (!tok.ok()) return tok.status();
  std::string line;
  for (int n = 1; std::getline(ss, line); ++n) {
    if (line.empty()) continue;
    auto ids = (*tok)->Encode(line);
    if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": ", ids.status().message()));
    if (!ids->empty()) seqs.push_back(std::move(*ids));
  }
  return seqs;
}

}  // namespace

int main(int argc, char** argv) {
  ls::ShowOwnFlagsInHelp();
  absl::SetProgramUsageMessage("latentserve-calibrate --model DIR --prompts FILE --out DIR2");
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_model), out = absl::GetFlag(FLAGS_out);
  if (dir.empty() || out.empty() || absl::GetFlag(FLAGS_prompts).empty())
    return Fail("--model, --prompts and --out are required");
  std::error_code ec;
  if (fs::exists(out) && fs::equivalent(dir, out, ec)) return Fail("--out must differ from --model");
  ls::CalibrationOptions opt;
  opt.iters = absl::GetFlag(FLAGS_iters);
  opt.histogram = {absl::GetFlag(FLAGS_num_bins), absl::GetFlag(FLAGS_range_lo), absl::GetFlag(FLAGS_range_hi)};
  if (opt.histogram.num_bins < 1 || !(opt.histogram.hi > opt.histogram.lo))
    return Fail("--num_bins must be positive and --range_hi above --range_lo");

  ls::CpuBackend backend(absl::GetFlag(FLAGS_threads));
  auto model = ls::StableLatentMoe::Load(dir, &backend);
  if (!model.ok()) return Fail(std::string(model.status().message()));
  auto seqs = ReadPrompts(absl::GetFlag(FLAGS_prompts), dir);
  if (!seqs.ok()) return Fail(std::string(seqs.status().message()));
  auto result = ls::Calibrate(**model, *seqs, opt);
  if (!result.ok()) return Fail(std::string(result.status().message()));

  // Write the new directory: other files copied, weights rewritten with the new biases.
  fs::create_directories(out, ec);
  if (ec) return Fail(absl::StrCat("--out ", out, ": ", ec.message()));
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.find(".safetensors") != std::string::npos) continue;
    fs::copy_file(e.path(), fs::path(out) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return Fail(absl::StrCat("copying ", name, ": ", ec.message()));
  }
  ls::SafetensorsWriter w;
  for (const auto& [name, entry] : (*model)->weight_store().Entries())
    w.AddRaw(name, entry->shape, entry->dtype, std::string(static_cast<const char*>(entry->data), entry->bytes));
  const int32_t N = (*model)->config().n_routed_experts;
  for (const auto& [layer, bias] : result->biases)
    w.Add(absl::StrCat("model.layers.", layer, ".mlp.gate.e_score_correction_bias"), {N}, bias, ls::DType::kF32);
  if (auto s = w.Write(out + "/model.safetensors"); !s.ok()) return Fail(std::string(s.message()));

  nlohmann::json report = {{"sequences", seqs->size()}, {"layers", nlohmann::json::array()}};
  for (const auto& [layer, b] : result->biases)
    report["layers"].push_back({{"layer", layer},
                                {"max_over_mean_before", result->max_over_mean_before.at(layer)},
                                {"max_over_mean_after", result->max_over_mean_after.at(layer)}});
  std::printf("%s\n", report.dump(1).c_str());
  return 0;
}
