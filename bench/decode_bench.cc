// Decode throughput of the model step per batch size, on the CPU backend (default) or the CUDA
// one, on a random BF16 model (d=1024, 4 layers, 64 experts top-8, d_lat=256, f=512; or, with
// --large, d=2048, 8 layers, f=1024, d_lat=512) or on a given model directory, with the
// weight-read bandwidth it achieves and, on the CPU, the machine's memory copy bandwidth measured
// in the same run. Prints JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/logits_row.h"
#include "bench/random_model.h"
#include "kernels/cpu/gemm.h"
#include "kernels/create_backend.h"
#include "models/kv_cache.h"
#include "models/registry.h"

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
  double prefill_tokens_per_s;  // of the prefill before the timed steps (batch · prefill_tokens in one step)
  ls::StepProfile profile;      // seconds per part over the timed steps
  int steps;
  double expert_bytes_per_step = 0;  // of weight_bytes_per_step: the routed experts' share
  ls::StepProfile prefill_profile;   // seconds per part of the prefill step
};

// {"attention": 0.123, ...}: milliseconds per step by part of the layer.
std::string PartsJson(const ls::StepProfile& profile, int steps) {
  std::string out = "{";
  for (size_t i = 0; i < profile.seconds.size(); ++i) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s\"%s\": %.3f", i ? ", " : "", std::string(ls::kStepPartNames[i]).c_str(),
                  1e3 * profile.seconds[i] / steps);
    out += buf;
  }
  return out + "}";
}

int prefill_tokens = 64;               // prompt tokens per sequence before the timed decode steps (--prefill)
ls::DType kv_dtype = ls::DType::kF32;  // --kv_cache_dtype, as the backend takes it
ls::QuantScheme quantization = ls::QuantScheme::kNone;  // --quantization

// Bytes one GEMM weight occupies as the kernels read it (scales included), for the bandwidth figures.
double WeightBytes(ls::QuantScheme q) {
  switch (q) {
    case ls::QuantScheme::kInt8:
    case ls::QuantScheme::kInt8A8:
    case ls::QuantScheme::kFp8:
      return 1.0;
    case ls::QuantScheme::kInt4:
    case ls::QuantScheme::kInt4A8:
      return 0.5 + 2.0 / 32;  // a BF16 scale per 32
    default:
      return 2.0;
  }
}

// Prefills `batch` sequences of prefill_tokens tokens, then times `steps` decode steps.
// With token0, every sequence feeds token 0 at every position (the workload of llama.cpp's
// batched bench, where all sequences route to the same experts).
// With sync_parts, every part of the step waits for the backend, so that the parts add up to the
// device's time (for backends that queue work); the step time is then not representative.
// Greedy decoding (greedy != kNone): each step's tokens also chosen, from full rows on the host
// (kHostArgmax: the rows copied back and reduced there, as the sampler does) or by the model on its
// backend (kRecords: StepSequence::greedy, an id per row copied back).
enum class Greedy { kNone, kHostArgmax, kRecords };
Result RunDecode(ls::Model& model, int batch, int steps, bool token0 = false, bool sync_parts = false,
                 Greedy greedy = Greedy::kNone) {
  const auto& c = model.config();
  const int block = 16, blocks_per_seq = (prefill_tokens + steps + block) / block + 1;
  ls::KvCache cache(model.backend(), model.kv_layout(), batch * blocks_per_seq, block, kv_dtype, batch);
  std::vector<ls::StepSequence> seqs(batch);
  ls::StepBatch pre;
  for (int i = 0; i < batch; ++i) {
    for (int b = 0; b < blocks_per_seq; ++b) seqs[i].block_table.push_back(i * blocks_per_seq + b);
    seqs[i].state_slot = i;
    seqs[i].num_tokens = prefill_tokens;
    for (int t = 0; t < prefill_tokens; ++t) pre.tokens.push_back(token0 ? 0 : (i * 131 + t * 17) % c.vocab_size);
  }
  pre.seqs = seqs;
  std::vector<float> logits;
  model.backend()->Synchronize();
  ls::StepProfile prefill_profile;
  if (sync_parts) prefill_profile.wait_for = model.backend();
  model.SetProfile(&prefill_profile);
  const auto p0 = Clock::now();
  (void)model.Forward(pre, cache, &logits);
  model.backend()->Synchronize();
  const double prefill_s = Seconds(p0, Clock::now());
  for (auto& s : seqs) s.start_pos = prefill_tokens, s.num_tokens = 1, s.greedy = greedy == Greedy::kRecords;

  // Bytes of weights one step reads: everything dense, plus each expert used at least once.
  const double bf = WeightBytes(quantization);
  const double d = c.hidden_size, hd = c.attention.head_dim, H = c.attention.num_heads, Hkv = c.attention.num_kv_heads;
  const double wdt = c.expert_width(), f = c.moe.expert_ffn;
  const double dense_per_layer =
      (d * H * hd * 2 + d * Hkv * hd * 2) + d * c.moe.num_experts + (c.moe.latent_size > 0 ? 2 * d * wdt : 0) + 2 * d;
  // MXFP4 experts: half a byte a weight and an E8M0 scale per 32; INT4: a BF16 scale (and a zero
  // point's half byte) per group.
  const ls::QuantizationConfig::Group* stored =
      c.quantization.quantized() && !c.quantization.groups.empty() ? &c.quantization.groups[0] : nullptr;
  const double stored_bytes = !stored ? bf
                              : stored->codes == ls::DType::kE2M1
                                  ? 0.5 + 1.0 / 32
                                  : 0.5 + (stored->symmetric ? 2.0 : 2.5) / stored->group_size;
  const double expert_bytes = 3 * wdt * f * stored_bytes;
  const double head_bytes = static_cast<double>(c.vocab_size) * d *
                            WeightBytes(quantization == ls::QuantScheme::kInt4     ? ls::QuantScheme::kInt8
                                        : quantization == ls::QuantScheme::kInt4A8 ? ls::QuantScheme::kInt8A8
                                                                                   : quantization);
  double touched = 0, expert_touched = 0;
  model.ResetExpertTokenCounts();
  ls::StepProfile profile;
  if (sync_parts) profile.wait_for = model.backend();
  model.SetProfile(&profile);
  int64_t chosen = 0;  // the chosen ids' sum, kept so that the choice is not optimized away
  auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) {
    ls::StepBatch b;
    for (int i = 0; i < batch; ++i) b.tokens.push_back(token0 ? 0 : (s * 7 + i * 3) % c.vocab_size);
    b.seqs = seqs;
    auto before = model.expert_token_counts();
    (void)model.Forward(b, cache, &logits);
    if (greedy == Greedy::kHostArgmax)
      for (int i = 0; i < batch; ++i) chosen += ls::ArgmaxRow(logits.data() + i * c.vocab_size, c.vocab_size);
    if (greedy == Greedy::kRecords)
      for (int i = 0; i < batch; ++i) chosen += static_cast<int64_t>(logits[i * ls::kGreedyRecordFloats]);
    const auto& after = model.expert_token_counts();
    int active = 0;
    for (size_t e = 0; e < after.size(); ++e) active += after[e] != before[e];
    touched += dense_per_layer * bf * c.num_hidden_layers + active * expert_bytes + head_bytes;
    expert_touched += active * expert_bytes;
    for (auto& q : seqs) q.start_pos += 1;
  }
  const double secs = Seconds(t0, Clock::now());
  model.SetProfile(nullptr);
  if (chosen < 0) std::fprintf(stderr, "negative token ids\n");
  return {batch,
          batch * steps / secs,
          1e3 * secs / steps,
          touched / steps,
          touched / secs / 1e9,
          batch * prefill_tokens / prefill_s,
          profile,
          steps,
          expert_touched / steps,
          prefill_profile};
}

}  // namespace

// decode_bench [--token0] [--greedy] [--large | --k3_moe [--experts N]] [--mxfp4 | --int4 GROUP [--int4_zero_points]]
// [--model_out DIR] [--prefill N] [--repeat R]
// [--kv_cache_dtype auto|float32|bfloat16] [--activation_dtype auto|float32|bfloat16|int8] [--cpu_isa NAME]
//              [--quantization none|int8|fp8|int4] [--backend cpu|cuda] [threads [model_dir [batch ...]]]:
// without a model directory (or with "-"), a random model and batches 1 and 16 (1 to 256 on
// CUDA); with one (e.g. the peer model of the CPU comparison), batches 1 8 32; or the batches
// given; each after a prefill of N tokens per sequence (default 64), over a float32 KV cache
// unless --kv_cache_dtype says otherwise (as the server's flag). --mxfp4 and --int4 store the random
// model's routed experts as a published checkpoint does (compressed-tensors MXFP4, or INT4 in
// groups of GROUP with BF16 scales, symmetric or with zero points). --token0 runs the peer
// benchmark's workload (token 0 everywhere) beside the distinct-token one. --greedy adds greedy
// decoding's steps, tokens chosen from full rows on the host against the model's greedy records
// (greedy_results: the fastest of R alternating runs each). --repeat R times each
// batch R times (each after its own prefill) and reports the fastest run, and the fastest prefill
// (prefill_tokens_per_s: batch · N tokens in one step). --quantization quantizes the GEMM weights
// at load as the server's flag does; --activation_dtype and --cpu_isa are the server's flags too.
// An unknown flag, a flag without its value or a count that is not a whole number is refused by
// name (exit status 2), before anything runs.
constexpr const char* kUsage =
    "usage: decode_bench [--token0] [--greedy] [--large | --k3_moe [--experts N]]\n"
    "                    [--mxfp4 | --int4 GROUP [--int4_zero_points]] [--model_out DIR]\n"
    "                    [--prefill N] [--repeat R] [--kv_cache_dtype auto|float32|bfloat16]\n"
    "                    [--activation_dtype auto|float32|bfloat16|int8] [--cpu_isa NAME]\n"
    "                    [--quantization none|int8|fp8|int4|w8a8|w4a8] [--backend cpu|cuda]\n"
    "                    [threads [model_dir|- [batch ...]]]\n";

// Refuses a command line by name: the message, the usage, exit status 2.
int Refuse(const std::string& message) {
  std::fprintf(stderr, "decode_bench: %s\n%s", message.c_str(), kUsage);
  return 2;
}

// `text` as a whole number of at least `min`; false when it is not one.
bool ParseCount(const std::string& text, int min, int* out) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoi(text);
  return *out >= min;
}

int main(int argc, char** argv) {
  bool token0 = false, large = false, k3_moe = false, mxfp4 = false, greedy = false, int4_zero_points = false;
  int int4_group = 0;  // --int4: the random model's experts in INT4 groups of this many
  int k3_experts = 64;
  std::string model_out;  // --model_out: where the random model is written and kept (reused when there)
  int repeat = 1;         // timed runs per batch, the fastest reported (--repeat)
  std::string kv_text = "float32";
  ls::BackendOptions options;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (a.size() < 2 || a[0] != '-') {  // positional ("-" too: the random model)
      args.push_back(a);
      continue;
    }
    if (a == "--token0") {
      token0 = true;
    } else if (a == "--greedy") {
      greedy = true;
    } else if (a == "--large") {
      large = true;
    } else if (a == "--k3_moe") {
      k3_moe = true;
    } else if (a == "--mxfp4") {
      mxfp4 = true;
    } else if (a == "--int4_zero_points") {
      int4_zero_points = true;
    } else {
      // Every other flag takes a value.
      static const char* const kValued[] = {"--experts",          "--model_out", "--kv_cache_dtype", "--prefill",
                                            "--backend",          "--cpu_isa",   "--repeat",         "--quantization",
                                            "--activation_dtype", "--int4"};
      if (std::find(std::begin(kValued), std::end(kValued), a) == std::end(kValued))
        return Refuse("unknown flag '" + a + "'");
      if (i + 1 >= argc) return Refuse(a + " needs a value");
      const std::string v = argv[++i];
      if (a == "--experts") {
        if (!ParseCount(v, 16, &k3_experts)) return Refuse("--experts '" + v + "': expected a whole number >= 16");
      } else if (a == "--int4") {
        if (!ParseCount(v, 8, &int4_group) || int4_group % 8 != 0)
          return Refuse("--int4 '" + v + "': expected a group size, a multiple of 8");
      } else if (a == "--prefill") {
        if (!ParseCount(v, 1, &prefill_tokens)) return Refuse("--prefill '" + v + "': expected a whole number >= 1");
      } else if (a == "--repeat") {
        if (!ParseCount(v, 1, &repeat)) return Refuse("--repeat '" + v + "': expected a whole number >= 1");
      } else if (a == "--model_out") {
        model_out = v;
      } else if (a == "--kv_cache_dtype") {
        kv_text = v;
      } else if (a == "--backend") {
        options.name = v;
      } else if (a == "--activation_dtype") {
        options.activation_dtype = v;
      } else if (a == "--cpu_isa") {
        options.cpu_isa = v;
      } else {  // --quantization
        auto q = ls::ParseQuantScheme(v);
        if (!q.ok()) return Refuse(std::string(q.status().message()));
        quantization = *q;
      }
    }
  }
  if (mxfp4 && int4_group > 0) return Refuse("--mxfp4 and --int4 are two formats for the same experts: give one");
  if (int4_zero_points && int4_group == 0) return Refuse("--int4_zero_points needs --int4 GROUP");
  if (!args.empty() && !ParseCount(args[0], 0, &options.threads))
    return Refuse("threads '" + args[0] + "': expected a whole number (0: every core)");
  const bool own_model = args.size() < 2 || args[1] == "-";
  const std::string dir = !own_model ? args[1]
                          : !model_out.empty()
                              ? model_out
                              : (std::filesystem::temp_directory_path() / "latentserve_decode_bench_model").string();
  const bool cpu = options.name == "cpu";
  std::vector<int> batches;
  for (size_t i = 2; i < args.size(); ++i) {
    int b = 0;
    if (!ParseCount(args[i], 1, &b)) return Refuse("batch '" + args[i] + "': expected a whole number >= 1");
    batches.push_back(b);
  }
  if (batches.empty()) {
    if (!own_model)
      batches = {1, 8, 32};
    else
      batches = cpu ? std::vector<int>{1, 16} : std::vector<int>{1, 8, 32, 128, 256};
  }
  ls::bench::RandomModelSpec spec;
  if (large) {
    spec.d = 2048, spec.layers = 8, spec.heads = 32, spec.kv_heads = 8, spec.f = 1024, spec.d_lat = 512;
    spec.vocab = 32768;
  }
  if (k3_moe) {
    // One Kimi K3 MoE layer at its real sizes (d 7168, latent 3584, experts 3072 wide, top-16, two
    // shared experts merged 6144 wide) behind a small GQA attention; --experts of K3's 896 (their
    // weights must fit in memory: 66 MB each in BF16, 17.5 MB in MXFP4).
    spec.d = 7168, spec.layers = 1, spec.heads = 56, spec.kv_heads = 8, spec.head_dim = 128, spec.vocab = 4096;
    spec.experts = k3_experts, spec.top_k = 16, spec.f = 3072, spec.d_lat = 3584, spec.shared_f = 6144;
  }
  spec.mxfp4_experts = mxfp4;
  spec.int4_experts_group = int4_group;
  spec.int4_zero_points = int4_zero_points;
  if (own_model && !(!model_out.empty() && std::filesystem::exists(dir + "/config.json"))) {
    if (auto s = ls::bench::WriteRandomModel(spec, dir, 1); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  std::string error;
  std::unique_ptr<ls::Backend> backend = ls::CreateBackend(options, &error);
  if (!backend) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  auto model = ls::LoadModel(dir, backend.get(), ls::LoadOptions{quantization});
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  if (auto s = ls::CheckActivationDtype(**model, options.activation_dtype); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  auto kv_requested = ls::ParseKvCacheDType(kv_text);
  auto kv_chosen = kv_requested.ok() ? ls::ChooseKvCacheDType(*kv_requested, (*model)->dtype(), *backend)
                                     : absl::StatusOr<ls::DType>(kv_requested.status());
  if (!kv_chosen.ok()) {
    std::fprintf(stderr, "--%s\n", std::string(kv_chosen.status().message()).c_str());
    return 1;
  }
  kv_dtype = *kv_chosen;
  const ls::ModelConfig& c = (*model)->config();
  RunDecode(**model, 1, 8);  // warm-up: page in the weights
  std::vector<Result> results;
  for (int b : batches) {
    Result best = RunDecode(**model, b, b == 1 ? 64 : 32);
    for (int r = 1; r < repeat; ++r) {
      Result again = RunDecode(**model, b, b == 1 ? 64 : 32);
      const bool faster_prefill = again.prefill_tokens_per_s > best.prefill_tokens_per_s;
      const Result prefill = faster_prefill ? again : best;
      if (again.step_ms < best.step_ms) best = again;
      best.prefill_tokens_per_s = prefill.prefill_tokens_per_s;
      best.prefill_profile = prefill.prefill_profile;
    }
    results.push_back(best);
    if (!cpu) {  // the parts from a second run in which each part waits for the device
      const Result parts = RunDecode(**model, b, 16, false, true);
      results.back().profile = parts.profile;
      results.back().steps = parts.steps;
      results.back().prefill_profile = parts.prefill_profile;
    }
  }
  std::vector<Result> same;
  if (token0)
    for (int b : batches) same.push_back(RunDecode(**model, b, b == 1 ? 64 : 32, true));
  // Greedy: the step with its tokens chosen from full rows on the host, and from the model's
  // records, alternating, the fastest of `repeat` each.
  std::vector<std::pair<Result, Result>> greedy_runs;
  if (greedy) {
    for (int b : batches) {
      std::pair<Result, Result> best;
      for (int r = 0; r < repeat; ++r) {
        const Result host = RunDecode(**model, b, b == 1 ? 64 : 32, false, false, Greedy::kHostArgmax);
        const Result records = RunDecode(**model, b, b == 1 ? 64 : 32, false, false, Greedy::kRecords);
        if (r == 0 || host.step_ms < best.first.step_ms) best.first = host;
        if (r == 0 || records.step_ms < best.second.step_ms) best.second = records;
      }
      greedy_runs.push_back(best);
    }
  }
  const int threads = options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  // The GPU's copy bandwidth is measured by bench/moe_kernels; here only the host's.
  const double copy = cpu ? CopyBandwidth(threads) : 0;
  std::printf(
      "{\n  \"benchmark\": \"decode\",\n  \"backend\": \"%s\",\n  \"model\": {\"dir\": \"%s\", \"d\": %lld, "
      "\"layers\": %d, \"experts\": %d, \"top_k\": %d, \"d_lat\": %lld, \"f\": %lld, \"vocab\": %lld},\n"
      "  \"threads\": %d,\n  \"cpu_isa\": \"%s\",\n  \"prefill_tokens\": %d,\n  \"copy_bandwidth_gbps\": %.2f,\n"
      "  \"parts_timing\": \"%s\",\n  \"kv_cache_dtype\": \"%s\",\n  \"quantization\": \"%s\",\n"
      "  \"activation_dtype\": \"%s\",\n  \"results\": [\n",
      options.name.c_str(), own_model ? "random" : dir.c_str(), static_cast<long long>(c.hidden_size),
      c.num_hidden_layers, c.moe.num_experts, c.moe.top_k, static_cast<long long>(c.moe.latent_size),
      static_cast<long long>(c.moe.expert_ffn), static_cast<long long>(c.vocab_size), threads,
      ls::CpuIsaName().c_str(), prefill_tokens, copy / 1e9,
      cpu ? "host, as the step runs" : "device, each part synchronized in a separate run",
      ls::KvCacheDTypeName(kv_dtype).c_str(), ls::QuantSchemeName(quantization), options.activation_dtype.c_str());
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::printf(
        "    {\"batch\": %d, \"tokens_per_s\": %.1f, \"over_batch1\": %.2f, \"step_ms\": %.3f, "
        "\"prefill_tokens_per_s\": %.1f, "
        "\"weight_mb_per_step\": %.1f, \"expert_mb_per_step\": %.1f, \"weight_read_gbps\": %.2f, "
        "\"weight_read_over_copy\": %.3f,\n"
        "     \"parts_ms_per_step\": %s,\n"
        "     \"prefill_parts_ms\": %s}%s\n",
        r.batch, r.tokens_per_s, r.tokens_per_s / results[0].tokens_per_s, r.step_ms, r.prefill_tokens_per_s,
        r.weight_bytes_per_step / 1e6, r.expert_bytes_per_step / 1e6, r.weight_gbps,
        copy > 0 ? r.weight_gbps * 1e9 / copy : 0.0, PartsJson(r.profile, r.steps).c_str(),
        PartsJson(r.prefill_profile, 1).c_str(), i + 1 < results.size() ? "," : "");
  }
  std::printf("  ]");
  if (token0) {
    std::printf(",\n  \"token0_results\": [\n");
    for (size_t i = 0; i < same.size(); ++i)
      std::printf(
          "    {\"batch\": %d, \"tokens_per_s\": %.1f, \"over_batch1\": %.2f, \"step_ms\": %.3f,\n"
          "     \"parts_ms_per_step\": %s}%s\n",
          same[i].batch, same[i].tokens_per_s, same[i].tokens_per_s / same[0].tokens_per_s, same[i].step_ms,
          PartsJson(same[i].profile, same[i].steps).c_str(), i + 1 < same.size() ? "," : "");
    std::printf("  ]");
  }
  if (greedy) {
    std::printf(",\n  \"greedy_results\": [\n");
    for (size_t i = 0; i < greedy_runs.size(); ++i) {
      const auto& [host, records] = greedy_runs[i];
      std::printf(
          "    {\"batch\": %d, \"host_argmax_step_ms\": %.3f, \"records_step_ms\": %.3f, "
          "\"records_over_host\": %.3f}%s\n",
          host.batch, host.step_ms, records.step_ms, records.step_ms / host.step_ms,
          i + 1 < greedy_runs.size() ? "," : "");
    }
    std::printf("  ]");
  }
  std::printf("\n}\n");
  if (own_model && model_out.empty()) std::filesystem::remove_all(dir);
  return 0;
}
