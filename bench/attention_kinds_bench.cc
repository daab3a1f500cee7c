// GQA, MLA and KDA at the same model width, on the CPU: the cache bytes each keeps per token
// (KDA: per sequence, whatever its length), the tokens a --kv_cache_mb budget holds, and the
// decode step time as contexts grow (batch 1 and 8 at contexts 64 to 4,096: growing for the
// attention kinds, flat for KDA). Random BF16 models: d=1024, 4 layers, 16 heads, 64 experts
// top-8 (f=512) with one shared expert; GQA 4 KV heads of 64 dims (this project's format), MLA a
// 256-wide latent plus a 32-wide rope key (a DeepSeek-V3 directory), KDA 16 heads of 64 on every
// layer (a Kimi-Linear directory). Then MLA's two forms and its attention kernel, as medians of
// ROUNDS rounds that alternate the variants compared: one MLA layer's attention sublayer over a
// prefill chunk (512 or 2,048 tokens from position 0, and 512, 128 or 64 after 2,048 cached) in the
// absorbed and the expanded form, with the form the cost rule picks; and the MLA model's decode
// step (batch 1 and 8 at contexts 1,024 and 4,096, BF16 cache) with the latent attention kernel
// before its microkernels (bench/previous_latent_attention.h) and now. Prints JSON.
//   attention_kinds_bench [THREADS [KV_CACHE_MB [ROUNDS [PARTS]]]]
// PARTS: a comma list of kinds (the first part above), mla_prefill, mla_decode; default all.
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
#include "bench/previous_latent_attention.h"
#include "bench/random_model.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/dtype.h"
#include "models/kv_cache.h"
#include "models/layers/mla_attention.h"
#include "models/loader/weight_binder.h"
#include "models/registry.h"
#include "models/step_profile.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The CPU backend whose latent attention can be switched to the previous kernel.
class SwitchableLatentBackend final : public ls::CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  bool previous = false;
  void PagedLatentAttention(const ls::LatentAttentionParams& p) override {
    if (previous) return ls::bench::PreviousLatentAttention(pool(), p);
    CpuBackend::PagedLatentAttention(p);
  }
};

// Every cache row of every layer set to random BF16 values (what a prefill would leave; the
// timing of attention does not depend on the values).
void FillRandom(ls::KvCache& cache) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (int32_t l = 0; l < cache.num_layers(); ++l) {
    const ls::KvLayer k = cache.layer(l);
    const int64_t n = int64_t{cache.num_blocks()} * cache.block_size() * cache.spec(l).k_width;
    auto* rows = static_cast<uint16_t*>(k.k);
    for (int64_t i = 0; i < n; ++i) rows[i] = ls::F32ToBf16(nd(rng));
  }
}

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

// One MLA layer (layer 0 of a loaded model) with its own weights, buffers and cache: the attention
// sublayer over one sequence's chunk.
class MlaLayerRig {
 public:
  MlaLayerRig(const ls::Model& model, ls::CpuBackend* backend, int32_t max_context)
      : backend_(backend), buf_(backend) {
    ls::WeightBinder b(model.weight_store());
    layer_ = std::make_unique<ls::MlaAttention>(b, "model.layers.0.self_attn.", model.config());
    layer_->ForEachWeight([&](ls::Tensor& t, ls::WeightUse use) {
      const size_t bytes = backend_->PreparedWeightBytes(t, use);
      storage_.emplace_back(backend_, std::max<size_t>(bytes, 64));
      t = backend_->PrepareWeight(t, use, bytes ? storage_.back().data() : nullptr);
    });
    layer_->WeightsPrepared();
    d_ = model.config().hidden_size;
    const int32_t blocks = (max_context + 15) / 16;
    cache_ = std::make_unique<ls::KvCache>(backend_, std::vector<ls::KvLayerSpec>{layer_->kv_spec()}, blocks,
                                           16, ls::DType::kBF16);
    FillRandom(*cache_);
    for (int32_t i = 0; i < blocks; ++i) table_.push_back(i);
    std::mt19937 rng(4);
    std::normal_distribution<float> nd;
    h_.resize(static_cast<size_t>(max_context) * d_);
    for (float& e : h_) e = nd(rng);
  }
  ls::MlaAttention& layer() { return *layer_; }

  // Milliseconds for `n` new tokens after `cached` ones.
  double ChunkMs(int32_t n, int32_t cached) {
    const std::vector<ls::AttentionSeq> seqs = {{0, n, cached, table_.data(), static_cast<int32_t>(table_.size())}};
    std::vector<int32_t> positions(n);
    for (int32_t i = 0; i < n; ++i) positions[i] = cached + i;
    std::vector<float> x(static_cast<size_t>(n) * d_, 0.f);
    ls::StepContext ctx;
    ctx.backend = backend_;
    ctx.num_tokens = n;
    ctx.positions = positions.data();
    ctx.seqs = &seqs;
    ctx.cache = cache_.get();
    ctx.buf = &buf_;
    backend_->BeginStep();
    const auto t0 = Clock::now();
    layer_->Forward(ctx, 0, h_.data(), x.data());
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }

 private:
  ls::CpuBackend* backend_;
  ls::StepBuffers buf_;
  std::unique_ptr<ls::MlaAttention> layer_;
  std::vector<ls::DeviceBuffer> storage_;
  std::unique_ptr<ls::KvCache> cache_;
  std::vector<int32_t> table_;
  std::vector<float> h_;
  int64_t d_ = 0;
};

void MlaPrefill(const ls::Model& model, ls::CpuBackend* backend, int rounds) {
  MlaLayerRig rig(model, backend, 2048 + 512);
  const std::pair<int32_t, int32_t> chunks[] = {{512, 0}, {2048, 0}, {512, 2048}, {128, 2048}, {64, 2048}};
  std::printf("  \"mla_prefill\": [");
  bool first = true;
  for (const auto& [n, cached] : chunks) {
    rig.layer().set_form(ls::MlaForm::kByCost);
    const bool rule_expands = rig.layer().ChoosesExpanded(n, cached);
    std::vector<double> absorbed, expanded;
    for (int r = 0; r < rounds; ++r) {
      rig.layer().set_form(ls::MlaForm::kAbsorbed);
      absorbed.push_back(rig.ChunkMs(n, cached));
      rig.layer().set_form(ls::MlaForm::kExpanded);
      expanded.push_back(rig.ChunkMs(n, cached));
    }
    const double a = Median(absorbed), e = Median(expanded);
    std::printf(
        "%s\n    {\"new_tokens\": %d, \"cached\": %d, \"rule\": \"%s\", \"absorbed_ms\": %.2f, "
        "\"expanded_ms\": %.2f, \"absorbed_over_expanded\": %.2f}",
        first ? "" : ",", n, cached, rule_expands ? "expanded" : "absorbed", a, e, a / e);
    first = false;
  }
  std::printf("]");
}

// The MLA model's decode step with the previous and the current latent attention kernel: the
// whole step, and its attention part (the latent attention op, StepProfile's "attention").
void MlaDecode(ls::Model& model, SwitchableLatentBackend* backend, int rounds) {
  std::printf("  \"mla_decode\": [");
  bool first = true;
  ls::StepProfile profile;
  model.SetProfile(&profile);
  for (int context : {1024, 4096})
    for (int batch : {1, 8}) {
      const int block = 16, per_seq = (context + 16 + block) / block;
      ls::KvCache cache(backend, model.kv_layout(), batch * per_seq, block, ls::DType::kBF16, batch);
      FillRandom(cache);
      std::vector<ls::StepSequence> seqs(batch);
      for (int i = 0; i < batch; ++i) {
        for (int b = 0; b < per_seq; ++b) seqs[i].block_table.push_back(i * per_seq + b);
        seqs[i].state_slot = i;
        seqs[i].start_pos = context;
        seqs[i].num_tokens = 1;
      }
      std::vector<float> logits;
      // Milliseconds per step over 8 steps, and of it in attention.
      auto steps = [&](std::vector<double>* step_ms, std::vector<double>* attention_ms) {
        std::vector<ls::StepSequence> s = seqs;
        profile.Reset();
        const auto t0 = Clock::now();
        for (int step = 0; step < 8; ++step) {
          ls::StepBatch b;
          for (int i = 0; i < batch; ++i) b.tokens.push_back((step * 7 + i) % 8000 + 3);
          b.seqs = s;
          (void)model.Forward(b, cache, &logits);
          for (auto& q : s) ++q.start_pos;
        }
        step_ms->push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / 8);
        attention_ms->push_back(profile.seconds[static_cast<size_t>(ls::StepPart::kAttention)] * 1e3 / 8);
      };
      std::vector<double> previous, now, previous_attention, now_attention;
      for (int r = 0; r < rounds; ++r) {
        backend->previous = true;
        steps(&previous, &previous_attention);
        backend->previous = false;
        steps(&now, &now_attention);
      }
      const double p = Median(previous), n = Median(now), pa = Median(previous_attention), na = Median(now_attention);
      std::printf(
          "%s\n    {\"context\": %d, \"batch\": %d, \"previous_step_ms\": %.3f, \"step_ms\": %.3f, "
          "\"previous_over_now\": %.2f, \"previous_attention_ms\": %.3f, \"attention_ms\": %.3f, "
          "\"attention_previous_over_now\": %.2f}",
          first ? "" : ",", context, batch, p, n, p / n, pa, na, pa / na);
      first = false;
    }
  model.SetProfile(nullptr);
  std::printf("]");
}

}  // namespace

int main(int argc, char** argv) {
  ls::bench::PositionalArgs args(argc, argv, "attention_kinds_bench [THREADS [KV_CACHE_MB [ROUNDS [PARTS]]]]");
  const int threads = args.Int("THREADS", 0, 0, 1024);
  const size_t budget_mb = args.Int("KV_CACHE_MB", 512, 1, 1 << 24);
  const int rounds = args.Int("ROUNDS", 5, 1, 1000);
  const std::string parts = args.Str("PARTS", "kinds,mla_prefill,mla_decode");
  args.End();
  auto wants = [&](const char* part) {
    return ("," + parts + ",").find(std::string(",") + part + ",") != std::string::npos;
  };
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
  SwitchableLatentBackend backend(threads);
  std::printf(
      "{\n  \"benchmark\": \"attention_kinds\",\n  \"threads\": %d,\n  \"kv_cache_mb\": %zu,\n  \"rounds\": %d,\n",
      backend.pool().num_threads(), budget_mb, rounds);
  auto load = [&](const char* name, const ls::bench::RandomModelSpec& spec) {
    return ls::bench::WriteAndLoadRandomModel(spec, root + "/" + name, &backend);
  };
  const char* sep = "";
  if (wants("kinds")) {
    std::printf("  \"models\": [\n");
    const std::pair<const char*, ls::bench::RandomModelSpec> kinds[] = {{"gqa", gqa}, {"mla", mla}, {"kda", kda}};
    for (size_t k = 0; k < 3; ++k) {
      auto model = load(kinds[k].first, kinds[k].second);
      const auto layout = model->kv_layout();
      const size_t per_token = ls::KvCache::BytesPerBlock(layout, 1, ls::DType::kBF16);
      const size_t per_sequence = ls::KvCache::BytesPerStateSlot(layout);
      const int64_t capacity =
          per_token > 0
              ? static_cast<int64_t>((budget_mb << 20) / ls::KvCache::BytesPerBlock(layout, 16, ls::DType::kBF16)) * 16
              : -1;  // unbounded by the budget: KDA keeps no per-token cache
      std::printf(
          "    {\"attention\": \"%s\", \"kv_bytes_per_token_bf16\": %zu, \"state_bytes_per_sequence\": %zu, "
          "\"capacity_tokens\": %lld, \"decode\": [",
          kinds[k].first, per_token, per_sequence, static_cast<long long>(capacity));
      bool first = true;
      for (int context : {64, 256, 1024, 4096})
        for (int batch : {1, 8}) {
          std::printf("%s\n      {\"context\": %d, \"batch\": %d, \"step_ms\": %.3f}", first ? "" : ",", context, batch,
                      StepMs(*model, batch, context));
          first = false;
        }
      std::printf("]}%s\n", k + 1 < 3 ? "," : "");
    }
    std::printf("  ]");
    sep = ",\n";
  }
  if (wants("mla_prefill") || wants("mla_decode")) {
    auto model = load("mla", mla);
    if (wants("mla_prefill")) {
      std::printf("%s", sep);
      MlaPrefill(*model, &backend, rounds);
      sep = ",\n";
    }
    if (wants("mla_decode")) {
      std::printf("%s", sep);
      MlaDecode(*model, &backend, rounds);
    }
  }
  std::printf("\n}\n");
  std::filesystem::remove_all(root);
  return 0;
}
