// Engine throughput with 1, 8, 32 and 64 concurrent streams (each: a 32-token prompt, 64 greedy
// output tokens, ignore_eos), with the share of step time spent outside the model (scheduling,
// sampling, detokenization, output). Model: a directory given as argument, else a random
// d=1024 / 64-expert BF16 model; a second argument sets the KV cache type (auto, float32 or
// bfloat16; default auto, as the server). Prints JSON with each level's ratio to one stream.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/positional_args.h"
#include "bench/random_model.h"
#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/registry.h"

namespace {

struct Level {
  int streams;
  double tokens_per_s, outside_model_fraction, mean_step_ms;
};

Level Run(ls::Engine& engine, int streams, int prompt_len, int max_tokens, int vocab) {
  std::mt19937 rng(streams);
  const ls::MetricsSnapshot before = engine.Metrics();
  std::vector<std::unique_ptr<ls::OutputQueue>> qs;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < streams; ++i) {
    ls::Request r;
    r.id = "bench-" + std::to_string(streams) + "-" + std::to_string(i);
    for (int t = 0; t < prompt_len; ++t) r.prompt_ids.push_back(static_cast<int32_t>(3 + rng() % (vocab - 3)));
    r.params.temperature = 0;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    qs.push_back(std::make_unique<ls::OutputQueue>());
    if (!engine.Submit(r, qs.back()->Callback()).ok()) std::abort();
  }
  int64_t tokens = 0;
  for (auto& q : qs) tokens += q->WaitFinal().completion_tokens;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ls::MetricsSnapshot after = engine.Metrics();
  const double step = after.step_seconds - before.step_seconds, model = after.model_seconds - before.model_seconds;
  const double steps = static_cast<double>(after.steps - before.steps);
  return {streams, tokens / secs, step > 0 ? (step - model) / step : 0, 1e3 * step / std::max(1.0, steps)};
}

}  // namespace

int main(int argc, char** argv) {
  ls::bench::PositionalArgs args(argc, argv, "serving_bench [MODEL_DIR [KV_CACHE_DTYPE]]");
  std::string dir = args.Str("MODEL_DIR", "");
  const std::string kv = args.Str("KV_CACHE_DTYPE", "auto");
  args.End();
  bool temp = false;
  if (dir.empty()) {
    dir = (std::filesystem::temp_directory_path() / "latentserve_serving_bench_model").string();
    if (!ls::bench::WriteRandomModel({}, dir, 1).ok()) return 1;
    temp = true;
  }
  ls::CpuBackend backend(0);
  auto model = ls::LoadModel(dir, &backend);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  ls::EngineConfig cfg;
  cfg.scheduler.max_num_seqs = 64;
  cfg.enable_prefix_caching = false;
  auto kv_dtype = ls::ParseKvCacheDType(kv);
  if (!kv_dtype.ok()) {
    std::fprintf(stderr, "%s\n", std::string(kv_dtype.status().message()).c_str());
    return 1;
  }
  cfg.kv_cache_dtype = *kv_dtype;
  auto engine = ls::Engine::Create(model->get(), nullptr, cfg);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  const int vocab = static_cast<int>((*model)->config().vocab_size);
  // Warm-up at the largest level, so that the step's buffers have grown to their steady-state
  // sizes (first-touch page faults of a first large prefill are a one-time cost, not throughput).
  Run(**engine, 64, 32, 8, vocab);
  std::vector<Level> levels;
  for (int c : {1, 8, 32, 64}) levels.push_back(Run(**engine, c, 32, 64, vocab));
  std::printf("{\n  \"benchmark\": \"serving\",\n  \"model\": \"%s\",\n  \"threads\": %d,\n  \"prompt_tokens\": 32,\n"
              "  \"output_tokens\": 64,\n  \"kv_cache_dtype\": \"%s\",\n  \"levels\": [\n",
              temp ? "random d=1024 L=4 N=64 K=8 d_lat=256 f=512 BF16" : dir.c_str(), backend.pool().num_threads(),
              ls::KvCacheDTypeName((*engine)->kv_cache_dtype()).c_str());
  for (size_t i = 0; i < levels.size(); ++i) {
    const Level& l = levels[i];
    std::printf("    {\"streams\": %d, \"output_tokens_per_s\": %.1f, \"over_one_stream\": %.2f, "
                "\"mean_step_ms\": %.2f, \"outside_model_fraction\": %.4f}%s\n",
                l.streams, l.tokens_per_s, l.tokens_per_s / levels[0].tokens_per_s, l.mean_step_ms,
                l.outside_model_fraction, i + 1 < levels.size() ? "," : "");
  }
  std::printf("  ]\n}\n");
  if (temp) std::filesystem::remove_all(dir);
  return 0;
}
