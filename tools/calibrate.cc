// latentserve-calibrate: re-fits a model's router biases on a prompt set with the Quantile
// Balancing estimator, layer by layer, and writes a model directory with the new biases in the
// checkpoint's own layout and names (every other file copied, shards without a bias hard-linked,
// every other tensor copied byte for byte). Documents longer than the model's
// context are split into windows of at most the context (--window). Prints the windows and tokens
// used and the per-layer balance (max/mean tokens per expert) before and after, on the calibration
// set and, with --heldout, on held-out text: a table on stderr, JSON on stdout. With
// --placement_out, also plans an expert placement over --devices devices of --expert_slots slots
// from the calibrated model's expert load on the calibration set served as traffic is (each
// window continued by --placement_max_tokens greedy tokens), loadable with
// `latentserve --expert_placement FILE`.
//   --prompts FILE / --heldout FILE: text, one document per line (needs the model's
//   tokenizer), or a .json file {"sequences": [[ids...], ...]}.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/cli_usage.h"
#include "engine/calibration.h"
#include "engine/expert_planner.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/loader/checkpoint_rewrite.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/tokenizer.h"

ABSL_FLAG(std::string, model, "", "model directory");
ABSL_FLAG(std::string, prompts, "", "prompt file: text lines, or .json with {\"sequences\": [[ids]]}");
ABSL_FLAG(std::string, out, "", "output model directory (created; must differ from --model)");
ABSL_FLAG(int32_t, iters, 10, "estimator updates per layer");
ABSL_FLAG(int32_t, num_bins, 1024, "histogram bins");
ABSL_FLAG(double, range_lo, -1.5, "histogram range, low end");
ABSL_FLAG(double, range_hi, 1.5, "histogram range, high end");
ABSL_FLAG(int32_t, threads, 0, "CPU threads (0: all)");
ABSL_FLAG(std::string, heldout, "",
          "held-out text (same formats as --prompts): the balance on it is shown before and after");
ABSL_FLAG(std::string, placement_out, "",
          "also write an expert placement planned from the calibrated model's expert load on --prompts");
ABSL_FLAG(int32_t, devices, 0, "with --placement_out: devices to place the experts on");
ABSL_FLAG(int32_t, expert_slots, 0, "with --placement_out: slots per device (0: just enough for every expert once)");
ABSL_FLAG(int32_t, placement_max_tokens, ls::kCalibrationMaxTokens,
          "with --placement_out: tokens the model writes after each window of --prompts (greedy), the set served as "
          "traffic is, so that each layer's plan comes from the rows it computes (the last layer's only from a "
          "window's last token and the written ones); 0: the windows alone, every token through every layer");
ABSL_FLAG(int32_t, window, 0,
          "longest window a document is split into, in tokens (0: the model's max_position_embeddings)");

namespace {

namespace fs = std::filesystem;

int Fail(const std::string& m) {
  std::fprintf(stderr, "latentserve-calibrate: %s\n", m.c_str());
  return 1;
}

// A prompt file (engine/calibration.h's ReadCalibrationSet), with the model's tokenizer for text.
absl::StatusOr<std::vector<std::vector<int32_t>>> ReadPrompts(const std::string& path, const std::string& model_dir) {
  std::unique_ptr<ls::tok::Tokenizer> tokenizer;
  if (!(path.size() > 5 && path.substr(path.size() - 5) == ".json")) {
    auto tok = ls::tok::LoadTokenizer(model_dir);
    if (!tok.ok()) return tok.status();
    tokenizer = std::move(*tok);
  }
  return ls::ReadCalibrationSet(path, tokenizer.get());
}

struct TextSet {
  int64_t documents = 0, windows = 0, tokens = 0;
};

TextSet Count(const std::vector<std::vector<int32_t>>& docs, int32_t window) {
  TextSet t;
  t.documents = static_cast<int64_t>(docs.size());
  for (const auto& d : docs) {
    t.windows += (static_cast<int64_t>(d.size()) + window - 1) / window;
    t.tokens += static_cast<int64_t>(d.size());
  }
  return t;
}

nlohmann::json SetJson(const TextSet& t) {
  return {{"documents", t.documents}, {"windows", t.windows}, {"tokens", t.tokens}};
}

// Plans a placement from the model's expert load on `seqs` over --devices x --expert_slots, writes
// it to `path` and returns what it expects, against the uniform placement, as JSON.
absl::StatusOr<nlohmann::json> PlanPlacementFile(ls::Model& model, const std::vector<std::vector<int32_t>>& seqs,
                                                 int32_t window, const std::string& path) {
  const int32_t D = absl::GetFlag(FLAGS_devices), N = static_cast<int32_t>(model.config().moe.num_experts);
  if (D < 1) return absl::InvalidArgumentError("--devices must be at least 1");
  const int32_t S = absl::GetFlag(FLAGS_expert_slots) > 0 ? absl::GetFlag(FLAGS_expert_slots) : (N + D - 1) / D;
  const int32_t max_tokens = absl::GetFlag(FLAGS_placement_max_tokens);  // checked by main
  auto loads = ls::MeasureServedExpertLoads(model, seqs, max_tokens, std::nullopt, window);
  if (!loads.ok()) return loads.status();
  auto plan = ls::PlanFromLoads(*loads, N, D, S);
  if (!plan.ok()) return plan.status();
  if (plan->placements.empty()) return absl::InvalidArgumentError("the model has no MoE layers to place");
  std::ofstream out(path);
  out << ls::PlacementsToJson(plan->placements);
  if (!out.flush()) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot write"));
  return nlohmann::json{{"file", path},
                        {"num_devices", D},
                        {"slots_per_device", S},
                        {"max_tokens", max_tokens},
                        {"expected_device_max_over_mean", plan->expected_device_max_over_mean},
                        {"uniform_expected_device_max_over_mean", plan->uniform_device_max_over_mean}};
}

}  // namespace

int main(int argc, char** argv) {
  ls::ShowOwnFlagsInHelp();
  absl::SetProgramUsageMessage("latentserve-calibrate --model DIR --prompts FILE --out DIR2 [--heldout FILE]");
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
  auto model = ls::LoadModel(dir, &backend);
  if (!model.ok()) return Fail(std::string(model.status().message()));
  const int32_t context = static_cast<int32_t>((*model)->config().max_position_embeddings);
  if (const int32_t t = absl::GetFlag(FLAGS_placement_max_tokens); t < 0 || t >= context)
    return Fail(
        absl::StrCat("--placement_max_tokens must be within [0, ", context, ") (the model's context), got ", t));
  opt.window = absl::GetFlag(FLAGS_window);
  if (opt.window < 0) return Fail("--window must not be negative");
  if (opt.window == 0 || opt.window > context) opt.window = context;
  auto seqs = ReadPrompts(absl::GetFlag(FLAGS_prompts), dir);
  if (!seqs.ok()) return Fail(std::string(seqs.status().message()));
  const std::string heldout_path = absl::GetFlag(FLAGS_heldout);
  std::vector<std::vector<int32_t>> heldout;
  std::map<int32_t, double> heldout_before, heldout_after;
  if (!heldout_path.empty()) {
    auto h = ReadPrompts(heldout_path, dir);
    if (!h.ok()) return Fail(std::string(h.status().message()));
    heldout = std::move(*h);
    auto b = ls::MeasureExpertBalance(**model, heldout, opt.window);
    if (!b.ok()) return Fail(absl::StrCat("--heldout: ", b.status().message()));
    heldout_before = std::move(*b);
  }
  auto result = ls::Calibrate(**model, *seqs, opt);
  if (!result.ok()) return Fail(absl::StrCat("--prompts: ", result.status().message()));
  if (!heldout.empty()) {
    auto a = ls::MeasureExpertBalance(**model, heldout, opt.window);
    if (!a.ok()) return Fail(absl::StrCat("--heldout: ", a.status().message()));
    heldout_after = std::move(*a);
  }

  // Write the new directory in the checkpoint's own layout, with the new biases.
  std::map<std::string, std::vector<float>> biases;
  for (const auto& [layer, bias] : result->biases) biases[(*model)->router_bias_name(layer)] = bias;
  ls::RewriteStats written;
  if (auto s = ls::RewriteCheckpoint(dir, out, biases, &written); !s.ok())
    return Fail(absl::StrCat("--out: ", s.message()));
  std::fprintf(stderr, "wrote %s: %d weight file(s) rewritten with the new biases, %d linked or copied unchanged\n",
               out.c_str(), written.shards_rewritten, written.shards_linked);

  // What calibration bought: a table on stderr, the same as JSON on stdout.
  const TextSet cal = Count(*seqs, opt.window), held = Count(heldout, opt.window);
  std::fprintf(stderr, "calibration set: %lld documents, %lld windows of at most %d tokens, %lld tokens\n",
               static_cast<long long>(cal.documents), static_cast<long long>(cal.windows), opt.window,
               static_cast<long long>(cal.tokens));
  if (!heldout.empty())
    std::fprintf(stderr, "held-out set:    %lld documents, %lld windows, %lld tokens\n",
                 static_cast<long long>(held.documents), static_cast<long long>(held.windows),
                 static_cast<long long>(held.tokens));
  std::fprintf(stderr, "max/mean tokens per expert (1.0 is even):\n  layer  calibration before -> after%s\n",
               heldout.empty() ? "" : "   held-out before -> after");
  nlohmann::json report = {{"window", opt.window}, {"calibration", SetJson(cal)}, {"layers", nlohmann::json::array()}};
  if (!heldout.empty()) report["heldout"] = SetJson(held);
  for (const auto& [layer, b] : result->biases) {
    const double before = result->max_over_mean_before.at(layer), after = result->max_over_mean_after.at(layer);
    nlohmann::json row = {{"layer", layer}, {"max_over_mean_before", before}, {"max_over_mean_after", after}};
    std::string line = absl::StrFormat("  %5d  %11.2f -> %-6.2f", layer, before, after);
    if (!heldout.empty()) {
      row["heldout_max_over_mean_before"] = heldout_before.at(layer);
      row["heldout_max_over_mean_after"] = heldout_after.at(layer);
      absl::StrAppendFormat(&line, "     %8.2f -> %.2f", heldout_before.at(layer), heldout_after.at(layer));
    }
    std::fprintf(stderr, "%s\n", line.c_str());
    report["layers"].push_back(row);
  }
  if (const std::string path = absl::GetFlag(FLAGS_placement_out); !path.empty()) {
    auto placement = PlanPlacementFile(**model, *seqs, opt.window, path);
    if (!placement.ok()) return Fail(absl::StrCat("--placement_out: ", placement.status().message()));
    report["placement"] = std::move(*placement);
    std::fprintf(stderr, "wrote %s: expected device max/mean %.3f (uniform placement: %.3f)\n", path.c_str(),
                 report["placement"]["expected_device_max_over_mean"].get<double>(),
                 report["placement"]["uniform_expected_device_max_over_mean"].get<double>());
  }
  std::printf("%s\n", report.dump(1).c_str());
  return 0;
}
