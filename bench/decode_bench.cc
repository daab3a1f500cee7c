// Decode throughput of the CPU engine at batch 1 and batch 16 on a random d=1024, 4-layer,
// 64-expert top-8, d_lat=256, f=512 BF16 model, with the weight-read bandwidth it achieves and
// the machine's memory copy bandwidth measured in the same run. Prints JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "bench/random_model.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"
#include "models/kv_cache.h"
#include "models/stable_latent_moe.h"

namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Best-of-5 memcpy traffic (read + write bytes per second) over a 256 MiB buffer, split across threads.
double CopyBandwidth(int threads) {
  const size_t n = size_t{256} << 20;
  std::vector<char> a(n, 1), b(n, 0);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] { std::memcpy(b.data() + n / threads * t, a.data() + n / threads * t, n / threads); });
    for (auto& t : ts) t.join();
    best = std::max(best, 2.0 * n / Seconds(t0, Clock::now()));
  }
  return best;
}

struct Result {
  int batch;
  double tokens_per_s, step_ms, weight_bytes_per_step, weight_gbps;
};

// Prefills `batch` sequences of 16 tokens, then times `steps` decode steps.
Result RunDecode(ls::StableLatentMoe& model, int batch, int steps) {
  const auto& c = model.config();
  const int block = 16, blocks_per_seq = (16 + steps + block) / block + 1;
  ls::KvCache cache(model.backend(), c, batch * blocks_per_seq, block);
  std::vector<ls::StepSequence> seqs(batch);
  ls::StepBatch pre;
  for (int i = 0; i < batch; ++i) {
    for (int b = 0; b < blocks_per_seq; ++b) seqs[i].block_table.push_back(i * blocks_per_seq + b);
    seqs[i].num_tokens = 16;
    for (int t = 0; t < 16; ++t) pre.tokens.push_back((i * 131 + t * 17) % c.vocab_size);
  }
  pre.seqs = seqs;
  std::vector<float> logits;
  (void)model.Forward(pre, cache, &logits);
  for (auto& s : seqs) s.start_pos = 16, s.num_tokens = 1;

  // Bytes of weights one step reads: everything dense, plus each expert used at least once.
  const double bf = 2.0;
  const double d = c.hidden_size, hd = c.head_dim, H = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const double wdt = c.expert_width(), f = c.moe_intermediate_size;
  const double dense_per_layer = (d * H * hd * 2 + d * Hkv * hd * 2) + d * c.n_routed_experts +
                                 (c.moe_latent_size > 0 ? 2 * d * wdt : 0) + 2 * d;
  const double expert_bytes = 3 * wdt * f * bf;
  const double head_bytes = static_cast<double>(c.vocab_size) * d * bf + d * bf;
  double touched = 0;
  model.ResetExpertTokenCounts();
  auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) {
    ls::StepBatch b;
    for (int i = 0; i < batch; ++i) b.tokens.push_back((s * 7 + i * 3) % c.vocab_size);
    b.seqs = seqs;
    auto before = model.expert_token_counts();
    (void)model.Forward(b, cache, &logits);
    const auto& after = model.expert_token_counts();
    int active = 0;
    for (size_t e = 0; e < after.size(); ++e) active += after[e] != before[e];
    touched += dense_per_layer * bf * c.num_hidden_layers + active * expert_bytes + head_bytes;
    for (auto& q : seqs) q.start_pos += 1;
  }
  const double secs = Seconds(t0, Clock::now());
  return {batch, batch * steps / secs, 1e3 * secs / steps, touched / steps, touched / secs / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 0;
  const std::string dir = (std::filesystem::temp_directory_path() / "latentserve_decode_bench_model").string();
  ls::bench::RandomModelSpec spec;
  if (auto s = ls::bench::WriteRandomModel(spec, dir, 1); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  ls::CpuBackend backend(threads);
  auto model = ls::StableLatentMoe::Load(dir, &backend);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  RunDecode(**model, 1, 8);  // warm-up: page in the weights
  const Result r1 = RunDecode(**model, 1, 64);
  const Result r16 = RunDecode(**model, 16, 32);
  const double copy = CopyBandwidth(backend.pool().num_threads());
  std::printf("{\n  \"benchmark\": \"decode\",\n  \"model\": {\"d\": %d, \"layers\": %d, \"experts\": %d, \"top_k\": %d, "
              "\"d_lat\": %d, \"f\": %d, \"vocab\": %d, \"dtype\": \"BF16\"},\n  \"threads\": %d,\n  \"avx512\": %s,\n"
              "  \"copy_bandwidth_gbps\": %.2f,\n  \"results\": [\n",
              spec.d, spec.layers, spec.experts, spec.top_k, spec.d_lat, spec.f, spec.vocab,
              backend.pool().num_threads(), ls::cpu::GemmUsesAvx512() ? "true" : "false", copy / 1e9);
  for (const Result* r : {&r1, &r16}) {
    std::printf("    {\"batch\": %d, \"tokens_per_s\": %.1f, \"step_ms\": %.3f, \"weight_mb_per_step\": %.1f, "
                "\"weight_read_gbps\": %.2f, \"weight_read_over_copy\": %.3f}%s\n",
                r->batch, r->tokens_per_s, r->step_ms, r->weight_bytes_per_step / 1e6, r->weight_gbps,
                r->weight_gbps * 1e9 / copy, r == &r1 ? "," : "");
  }
  std::printf("  ],\n  \"batch16_over_batch1\": %.2f\n}\n", r16.tokens_per_s / r1.tokens_per_s);
  std::filesystem::remove_all(dir);
  return 0;
}
