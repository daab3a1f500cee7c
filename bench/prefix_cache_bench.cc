// The prefix cache on a hybrid model (a random Kimi-Linear-shaped checkpoint: KDA layers with a
// full MLA layer every fourth, MoE FFNs), with the cache on and off in alternating rounds:
// (1) a 3-turn chat whose system prompt and tool declarations are `system` tokens long — each
//     turn's time to first token; (2) requests sharing prefixes of random lengths (64–1500 tokens,
//     not block-aligned) of a few documents, each with its own ending — the prompt tokens served
//     from the cache after warm-up, against what an exact radix cache (longest common start with
//     any earlier prompt) would serve. (2) also runs on an MLA-only model of the same width, whose
//     prefix cache is the KV blocks alone. Prints JSON; figures are medians over the rounds.
// Usage: prefix_cache_bench [threads] [rounds] [system_tokens] [requests]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/positional_args.h"
#include "bench/random_model.h"
#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::vector<int32_t> Random(std::mt19937& rng, int n, int vocab) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(3 + rng() % (vocab - 3));
  return t;
}

ls::Request Req(int id, std::vector<int32_t> prompt, int max_tokens) {
  ls::Request r;
  r.id = "q" + std::to_string(id);
  r.prompt_ids = std::move(prompt);
  r.params.max_tokens = max_tokens;
  r.params.temperature = 0;
  r.params.ignore_eos = true;
  return r;
}

// Runs one request; returns its time to first token and its final output.
ls::RequestOutput Run(ls::Engine& e, const ls::Request& r, double* ttft) {
  ls::OutputQueue q;
  const auto t0 = Clock::now();
  if (!e.Submit(r, q.Callback()).ok()) std::exit(1);
  ls::RequestOutput first = q.Next();
  *ttft = std::chrono::duration<double>(Clock::now() - t0).count();
  ls::RequestOutput all = first;
  while (all.finish_reason == ls::FinishReason::kNone) {
    ls::RequestOutput o = q.Next();
    all.token_ids.insert(all.token_ids.end(), o.token_ids.begin(), o.token_ids.end());
    all.finish_reason = o.finish_reason;
  }
  return all;
}

std::unique_ptr<ls::Engine> MakeEngine(ls::Model* model, bool cache) {
  ls::EngineConfig cfg;
  cfg.enable_prefix_caching = cache;
  cfg.kv_cache_bytes = size_t{1} << 30;
  auto e = ls::Engine::Create(model, nullptr, cfg);
  if (!e.ok()) {
    std::fprintf(stderr, "%s\n", std::string(e.status().message()).c_str());
    std::exit(1);
  }
  return std::move(*e);
}

// (1): per turn, TTFT with the cache and without.
void Chat(ls::Model* model, int system, int rounds) {
  const int vocab = static_cast<int>(model->config().vocab_size);
  std::vector<std::vector<double>> on(3), off(3);
  for (int round = 0; round < rounds; ++round)
    for (bool cache : {true, false}) {  // alternating: bandwidth drifts between rounds, not within a pair
      std::mt19937 rng(100 + round);
      auto e = MakeEngine(model, cache);
      std::vector<int32_t> prompt = Random(rng, system, vocab);
      for (int turn = 0; turn < 3; ++turn) {
        const std::vector<int32_t> user = Random(rng, 40, vocab);
        prompt.insert(prompt.end(), user.begin(), user.end());
        double ttft = 0;
        const ls::RequestOutput o = Run(*e, Req(turn, prompt, 32), &ttft);
        (cache ? on : off)[turn].push_back(ttft);
        prompt.insert(prompt.end(), o.token_ids.begin(), o.token_ids.end());  // the assistant's reply
      }
    }
  std::printf("  \"chat\": {\"system_tokens\": %d, \"turns\": [", system);
  for (int t = 0; t < 3; ++t)
    std::printf("%s{\"ttft_ms_cached\": %.1f, \"ttft_ms_uncached\": %.1f, \"speedup\": %.2f}", t ? ", " : "",
                1e3 * Median(on[t]), 1e3 * Median(off[t]), Median(off[t]) / Median(on[t]));
  std::printf("]},\n");
}

// (2): the share of the shareable prompt tokens served from the cache, after `warmup` requests.
void SharedPrefixes(const char* name, ls::Model* model, int requests, int rounds, bool last) {
  const int vocab = static_cast<int>(model->config().vocab_size);
  const int warmup = 10;
  std::vector<double> share, seconds, radix_share;
  int64_t cached_total = 0, radix_total = 0, prompt_total = 0;
  for (int round = 0; round < rounds; ++round) {
    std::mt19937 rng(7 + round);
    std::vector<std::vector<int32_t>> docs;
    for (int d = 0; d < 4; ++d) docs.push_back(Random(rng, 1500, vocab));
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < requests; ++i) {
      const auto& doc = docs[rng() % docs.size()];
      std::vector<int32_t> p(doc.begin(), doc.begin() + 64 + rng() % (1500 - 64 + 1));
      const std::vector<int32_t> own = Random(rng, 16 + rng() % 33, vocab);
      p.insert(p.end(), own.begin(), own.end());
      prompts.push_back(std::move(p));
    }
    auto e = MakeEngine(model, true);
    int64_t cached = 0, radix = 0, tokens = 0;
    const auto t0 = Clock::now();
    for (int i = 0; i < requests; ++i) {
      ls::OutputQueue q;
      if (!e->Submit(Req(i, prompts[i], 1), q.Callback()).ok()) std::exit(1);
      const ls::RequestOutput o = q.WaitFinal();
      size_t best = 0;  // an exact radix cache: the longest common start with an earlier prompt
      for (int j = 0; j < i; ++j) {
        size_t n = 0;
        while (n + 1 < prompts[i].size() && n < prompts[j].size() && prompts[i][n] == prompts[j][n]) ++n;
        best = std::max(best, n);
      }
      if (i < warmup) continue;
      cached += o.cached_prompt_tokens;
      radix += static_cast<int64_t>(best);
      tokens += static_cast<int64_t>(prompts[i].size());
    }
    seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    share.push_back(radix ? static_cast<double>(cached) / radix : 0);
    radix_share.push_back(tokens ? static_cast<double>(radix) / tokens : 0);
    cached_total += cached;
    radix_total += radix;
    prompt_total += tokens;
    const ls::MetricsSnapshot m = e->Metrics();
    if (round == rounds - 1)
      std::printf(
          "  \"%s\": {\"requests\": %d, \"warmup_requests\": %d, \"served_of_radix\": %.3f, "
          "\"radix_of_prompt\": %.3f, \"cached_tokens\": %lld, \"radix_tokens\": %lld, \"prompt_tokens\": %lld, "
          "\"seconds\": %.2f, \"snapshots_held\": %lld, \"snapshots_taken\": %lld, \"snapshot_evictions\": %lld}%s\n",
          name, requests, warmup, Median(share), Median(radix_share), static_cast<long long>(cached_total),
          static_cast<long long>(radix_total), static_cast<long long>(prompt_total), Median(seconds),
          static_cast<long long>(m.snapshots_held), static_cast<long long>(m.snapshots_taken),
          static_cast<long long>(m.snapshot_evictions), last ? "" : ",");
  }
}

}  // namespace

int main(int argc, char** argv) {
  ls::bench::PositionalArgs args(argc, argv, "prefix_cache_bench [THREADS [ROUNDS [SYSTEM_TOKENS [REQUESTS]]]]");
  const int threads = args.Int("THREADS", 0, 0, 1024);
  const int rounds = args.Int("ROUNDS", 3, 1, 1000);
  const int system = args.Int("SYSTEM_TOKENS", 2000, 1, 1 << 24);
  const int requests = args.Int("REQUESTS", 50, 1, 1 << 20);
  args.End();
  ls::bench::RandomModelSpec hybrid;
  hybrid.vocab = 8192;
  hybrid.d = 512;
  hybrid.layers = 8;
  hybrid.heads = 8;
  hybrid.head_dim = 64;
  hybrid.experts = 32;
  hybrid.top_k = 4;
  hybrid.f = 256;
  hybrid.d_lat = 0;
  hybrid.situ = false;
  hybrid.expert_output_norm = false;
  hybrid.kda = true;
  hybrid.full_attn_every = 4;
  ls::bench::RandomModelSpec mla = hybrid;
  mla.kda = false;
  mla.full_attn_every = 0;
  mla.mla_latent = 128;
  const std::string root = (std::filesystem::temp_directory_path() / "latentserve_prefix_cache").string();
  ls::CpuBackend backend(threads);
  auto load = [&](const char* name, const ls::bench::RandomModelSpec& spec) {
    return ls::bench::WriteAndLoadRandomModel(spec, root + "/" + name, &backend);
  };
  auto kimi = load("kimi_linear", hybrid);
  std::printf("{\n  \"benchmark\": \"prefix_cache\",\n  \"threads\": %d,\n  \"rounds\": %d,\n",
              backend.pool().num_threads(), rounds);
  std::printf("  \"state_slot_bytes\": %zu,\n", ls::KvCache::BytesPerStateSlot(kimi->kv_layout()));
  Chat(kimi.get(), system, rounds);
  SharedPrefixes("shared_prefixes_hybrid", kimi.get(), requests, rounds, false);
  kimi.reset();
  auto deepseek = load("mla", mla);
  SharedPrefixes("shared_prefixes_mla", deepseek.get(), requests, rounds, true);
  std::printf("}\n");
  return 0;
}
