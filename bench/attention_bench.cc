// CPU paged attention, one decode step of a batch of sequences (each a new token over its cached
// context), with a float32 and a BF16 cache side by side in the same run: time per step, per
// (token, KV head) task, and the KV bytes read per second. With PREFILL, also one prompt of that
// many tokens attended as one chunk (the kernel's tiles) and the same tokens one call each (one
// token at a time, as before tiles): times, their ratio, and GFLOP/s of the chunk. Prints JSON.
//   attention_bench [threads [batch [context [heads kv_heads head_dim [prefill]]]]]   (default 2 32
//   80 4 2 64 0: the tiny model's attention at the serving benchmark's contexts)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "bench/positional_args.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/dtype.h"
#include "kernels/thread_pool.h"

namespace {

struct Result {
  double step_us, task_us, kv_gbps;
};

Result Run(ls::ThreadPool& pool, ls::DType dtype, int batch, int ctx, int H, int Hkv, int hd) {
  constexpr int kBlock = 16;
  const int blocks_per_seq = (ctx + kBlock - 1) / kBlock;
  const int blocks = batch * blocks_per_seq;
  const int64_t kvw = static_cast<int64_t>(Hkv) * hd, elems = static_cast<int64_t>(blocks) * kBlock * kvw;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> kf(elems), vf(elems);
  for (auto& x : kf) x = nd(rng);
  for (auto& x : vf) x = nd(rng);
  std::vector<uint16_t> kb(elems), vb(elems);
  for (int64_t i = 0; i < elems; ++i) kb[i] = ls::F32ToBf16(kf[i]), vb[i] = ls::F32ToBf16(vf[i]);
  // Scattered blocks, as a running server's block tables are.
  std::vector<int32_t> ids(blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<ls::AttentionSeq> seqs(batch);
  for (int s = 0; s < batch; ++s) seqs[s] = {s, 1, ctx - 1, ids.data() + s * blocks_per_seq, blocks_per_seq};
  std::vector<float> q(static_cast<size_t>(batch) * H * hd), kn(batch * kvw), vn(batch * kvw), out(q.size());
  for (auto* v : {&q, &kn, &vn})
    for (auto& x : *v) x = nd(rng);
  ls::AttentionParams p;
  p.q = q.data();
  p.k_new = kn.data();
  p.v_new = vn.data();
  p.out = out.data();
  p.num_heads = H;
  p.num_kv_heads = Hkv;
  p.head_dim = hd;
  p.scale = 0.125f;
  p.cache = dtype == ls::DType::kBF16 ? ls::KvLayer{kb.data(), vb.data(), blocks, kBlock, dtype}
                                      : ls::KvLayer{kf.data(), vf.data(), blocks, kBlock, dtype};
  p.seqs = seqs.data();
  p.num_seqs = batch;
  for (int i = 0; i < 20; ++i) ls::cpu::PagedAttention(pool, p);
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    constexpr int kIters = 50;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kIters; ++i) ls::cpu::PagedAttention(pool, p);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kIters);
  }
  const double bytes = 2.0 * batch * ctx * kvw * ls::DTypeSize(dtype);
  return {1e6 * best, 1e6 * best * pool.num_threads() / (batch * Hkv), bytes / best / 1e9};
}

struct PrefillResult {
  double chunk_ms, token_ms;
};

// One sequence's `n`-token prompt from position 0: one PagedAttention call over the chunk, and n
// calls of one token each over the same cache (the same K/V written, the same outputs).
PrefillResult RunPrefill(ls::ThreadPool& pool, ls::DType dtype, int n, int H, int Hkv, int hd) {
  constexpr int kBlock = 16;
  const int blocks = (n + kBlock - 1) / kBlock;
  const int64_t kvw = static_cast<int64_t>(Hkv) * hd, elems = static_cast<int64_t>(blocks) * kBlock * kvw;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  std::vector<float> q(static_cast<size_t>(n) * H * hd), kn(n * kvw), vn(n * kvw), out(q.size());
  for (auto* v : {&q, &kn, &vn})
    for (auto& x : *v) x = nd(rng);
  std::vector<unsigned char> k(elems * ls::DTypeSize(dtype)), v(k.size());
  std::vector<int32_t> ids(blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  auto call = [&](int first, int count) {
    ls::AttentionSeq seq{0, count, first, ids.data(), blocks};
    ls::AttentionParams p;
    p.q = q.data() + static_cast<int64_t>(first) * H * hd;
    p.k_new = kn.data() + first * kvw;
    p.v_new = vn.data() + first * kvw;
    p.out = out.data() + static_cast<int64_t>(first) * H * hd;
    p.num_heads = H;
    p.num_kv_heads = Hkv;
    p.head_dim = hd;
    p.scale = 0.125f;
    p.cache = ls::KvLayer{k.data(), v.data(), blocks, kBlock, dtype};
    p.seqs = &seq;
    p.num_seqs = 1;
    ls::cpu::PagedAttention(pool, p);
  };
  auto best_ms = [&](auto&& run) {
    run();
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return 1e3 * best;
  };
  const double chunk = best_ms([&] { call(0, n); });
  const double tokens = best_ms([&] {
    for (int t = 0; t < n; ++t) call(t, 1);
  });
  return {chunk, tokens};
}

}  // namespace

int main(int argc, char** argv) {
  ls::bench::PositionalArgs args(argc, argv,
                                 "attention_bench [THREADS [BATCH [CONTEXT [HEADS [KV_HEADS [HEAD_DIM [PREFILL]]]]]]]");
  const int threads = args.Int("THREADS", 2, 1, 1024), batch = args.Int("BATCH", 32, 1, 1 << 20),
            ctx = args.Int("CONTEXT", 80, 1, 1 << 24), H = args.Int("HEADS", 4, 1, 1024),
            Hkv = args.Int("KV_HEADS", 2, 1, 1024), hd = args.Int("HEAD_DIM", 64, 1, 4096),
            prefill = args.Int("PREFILL", 0, 0, 1 << 20);
  args.End();
  if (H % Hkv != 0) {
    std::fprintf(stderr, "attention_bench: bad shape\n");
    return 1;
  }
  ls::ThreadPool pool(threads);
  const Result f32 = Run(pool, ls::DType::kF32, batch, ctx, H, Hkv, hd);
  const Result bf16 = Run(pool, ls::DType::kBF16, batch, ctx, H, Hkv, hd);
  std::printf("{\n  \"benchmark\": \"attention\",\n  \"threads\": %d,\n  \"batch\": %d,\n  \"context\": %d,\n"
              "  \"heads\": %d,\n  \"kv_heads\": %d,\n  \"head_dim\": %d,\n",
              threads, batch, ctx, H, Hkv, hd);
  for (const auto& [name, r] : {std::pair<const char*, Result>{"float32", f32}, {"bfloat16", bf16}})
    std::printf("  \"%s\": {\"step_us\": %.2f, \"task_us_per_thread\": %.3f, \"kv_read_gbps\": %.2f},\n", name,
                r.step_us, r.task_us, r.kv_gbps);
  std::printf("  \"bfloat16_speedup\": %.3f", f32.step_us / bf16.step_us);
  if (prefill > 0) {
    // Causal: token t scores t + 1 positions, two multiply-adds (scores, values) per dim each.
    const double flop = 4.0 * H * hd * (static_cast<double>(prefill) * (prefill + 1) / 2);
    std::printf(",\n  \"prefill\": {\"tokens\": %d", prefill);
    for (ls::DType dt : {ls::DType::kF32, ls::DType::kBF16}) {
      const PrefillResult r = RunPrefill(pool, dt, prefill, H, Hkv, hd);
      std::printf(
          ", \"%s\": {\"chunk_ms\": %.2f, \"token_by_token_ms\": %.2f, \"chunk_speedup\": %.2f, "
          "\"chunk_gflops\": %.1f}",
          dt == ls::DType::kF32 ? "float32" : "bfloat16", r.chunk_ms, r.token_ms, r.token_ms / r.chunk_ms,
          flop / r.chunk_ms / 1e6);
    }
    std::printf("}");
  }
  std::printf("\n}\n");
  return 0;
}
