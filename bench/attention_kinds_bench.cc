// GQA, MLA and KDA at the same model width, on the CPU: the cache bytes each keeps per token
// (KDA: per sequence, whatever its length), the tokens a --kv_cache_mb budget holds, and the
// decode step time as contexts grow (batch 1 and 8 at contexts 64 to 4,096: growing for the
// attention kinds, flat for KDA). Random BF16 models: d=1024, 4 layers, 16 heads, 64 experts
// top-8 (f=512) with one shared expert; GQA 4 KV heads of 64 dims (this project's format), MLA a
// 256-wide latent plus a 32-wide rope key (a DeepSeek-V3 directory), KDA 16 heads of 64 on every
// layer (a Kimi-Linear directory). Prints JSON.
//   attention_kinds_bench [THREADS [KV_CACHE_MB]]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/random_model.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/kv_cache.h"
#include "models/registry.h"

namespace {

using Clock = std::chrono::steady_clock;

// Milliseconds per decode step of `batch` sequences at `context` cached tokens (best of 3 runs
// of 8 steps), the caches filled by one prefill.
double StepMs(ls::Model& model, int batch, int context) {
  const int block = 16, per_seq = (context + 16 + block) / block;
  ls::KvCache cache(model.backend(), model.kv_layout(), batch * per_seq, block, ls::DType::kBF16, batch);
  std::vector<ls::StepSequence> seqs(batch);
  ls::StepBatch pre;
  for (int i = 0; i < batch; ++i) {
    for (int b = 0; b < per_seq; ++b) seqs[i].block_table.push_back(i * per_seq + b);
    seqs[i].state_slot = i;
    seqs[i].num_tokens = context;
    for (int t = 0; t < context; ++t) pre.tokens.push_back((i * 131 + t * 17) % 8000 + 3);
  }
  pre.seqs = seqs;
  std::vector<float> logits;
  (void)model.Forward(pre, cache, &logits);
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    std::vector<ls::StepSequence> s = seqs;
    for (auto& q : s) q.start_pos = context, q.num_tokens = 1;
    const auto t0 = Clock::now();
    for (int step = 0; step < 8; ++step) {
      ls::StepBatch b;
      for (int i = 0; i < batch; ++i) b.tokens.push_back((step * 7 + i) % 8000 + 3);
      b.seqs = s;
      (void)model.Forward(b, cache, &logits);
      for (auto& q : s) ++q.start_pos;
    }
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / 8);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 0;
  const size_t budget_mb = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 512;
  ls::bench::RandomModelSpec gqa;
  gqa.shared_f = gqa.f;
  gqa.d_lat = 0;
  gqa.situ = false;
  gqa.expert_output_norm = false;
  ls::bench::RandomModelSpec mla = gqa;
  mla.mla_latent = 256;
  ls::bench::RandomModelSpec kda = gqa;
  kda.kda = true;
  const std::string root = (std::filesystem::temp_directory_path() / "latentserve_attention_kinds").string();
  ls::CpuBackend backend(threads);
  std::printf("{\n  \"benchmark\": \"attention_kinds\",\n  \"threads\": %d,\n  \"kv_cache_mb\": %zu,\n  \"models\": [\n",
              backend.pool().num_threads(), budget_mb);
  const std::pair<const char*, ls::bench::RandomModelSpec> kinds[] = {{"gqa", gqa}, {"mla", mla}, {"kda", kda}};
  for (size_t k = 0; k < 3; ++k) {
    const std::string dir = root + "/" + kinds[k].first;
    if (auto s = ls::bench::WriteRandomModel(kinds[k].second, dir, 1); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    auto model = ls::LoadModel(dir, &backend);
    if (!model.ok()) {
      std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
      return 1;
    }
    const auto layout = (*model)->kv_layout();
    const size_t per_token = ls::KvCache::BytesPerBlock(layout, 1, ls::DType::kBF16);
    const size_t per_sequence = ls::KvCache::BytesPerStateSlot(layout);
    const int64_t capacity =
        per_token > 0 ? static_cast<int64_t>((budget_mb << 20) / ls::KvCache::BytesPerBlock(layout, 16, ls::DType::kBF16)) * 16
                      : -1;  // unbounded by the budget: KDA keeps no per-token cache
    std::printf("    {\"attention\": \"%s\", \"kv_bytes_per_token_bf16\": %zu, \"state_bytes_per_sequence\": %zu, "
                "\"capacity_tokens\": %lld, \"decode\": [",
                kinds[k].first, per_token, per_sequence, static_cast<long long>(capacity));
    bool first = true;
    for (int context : {64, 256, 1024, 4096})
      for (int batch : {1, 8}) {
        std::printf("%s\n      {\"context\": %d, \"batch\": %d, \"step_ms\": %.3f}", first ? "" : ",", context, batch,
                    StepMs(**model, batch, context));
        first = false;
      }
    std::printf("]}%s\n", k + 1 < 3 ? "," : "");
  }
  std::printf("  ]\n}\n");
  std::filesystem::remove_all(root);
  return 0;
}
