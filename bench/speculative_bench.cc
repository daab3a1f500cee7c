// Speculative decoding on one stream: the model (default models/tiny) continues Genesis 1:1-5
// (text that repeats itself, as the KJV does), greedy, with speculation off and on (k tokens per
// step) in alternating rounds — by n-gram lookup, or by a draft model when DRAFT_DIR is given
// (DRAFT_DIR "mtp": the model's own multi-token-prediction layer). MODEL_DIR "random-mtp" writes a
// DeepSeek-V3-shaped one-layer model (d 2048, MLA, 64 experts top-8 of width 768 and a shared
// expert) with an MTP layer built to imitate it (bench/random_model.h) and drafts with that layer:
// the step cost of verifying k + 1 positions against a plain step, with high acceptance. A model
// without a tokenizer continues 64 fixed pseudo-random token ids.
// Decode tokens per second (after the first token), the ratio, and the draft tokens proposed and
// accepted, the target model's time per step (a verifying step computes k + 1 positions) and the
// proposer's time per step. Prints JSON; medians over rounds.
// STREAMS (default 1) requests run side by side, each with prompt ids of its own where the model has
// no tokenizer (the same Genesis prompt otherwise, the prefix cache off): a plain step then decodes
// STREAMS rows, a verifying one STREAMS · (k + 1).
// Usage: speculative_bench [MODEL_DIR|random-mtp] [rounds] [k] [max_tokens] [DRAFT_DIR|mtp] [STREAMS]
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
#include "models/registry.h"
#include "tokenizer/load_tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kGenesis =
    "1:1 In the beginning God created the heaven and the earth.\n"
    "1:2 And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God "
    "moved upon the face of the waters.\n"
    "1:3 And God said, Let there be light: and there was light.\n"
    "1:4 And God saw the light, that it was good: and God divided the light from the darkness.\n"
    "1:5 And God called the light Day, and the darkness he called Night. And the evening and the morning were the "
    "first day.\n"
    "1:6";

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  ls::bench::PositionalArgs args(
      argc, argv, "speculative_bench [MODEL_DIR|random-mtp [ROUNDS [K [MAX_TOKENS [DRAFT_DIR [STREAMS]]]]]]");
  std::string dir = args.Str("MODEL_DIR", "models/tiny");
  const int rounds = args.Int("ROUNDS", 5, 1, 1000);
  const int k = args.Int("K", 4, 1, 64);
  const int max_tokens = args.Int("MAX_TOKENS", 64, 1, 1 << 20);
  std::string draft_dir = args.Str("DRAFT_DIR", "");
  const int streams = args.Int("STREAMS", 1, 1, 256);
  args.End();
  ls::CpuBackend backend(0);
  if (dir == "random-mtp") {
    ls::bench::RandomModelSpec spec;
    spec.vocab = 8192, spec.d = 2048, spec.layers = 1, spec.heads = 16, spec.experts = 64, spec.top_k = 8;
    spec.f = 768, spec.d_lat = 0, spec.shared_f = 768, spec.situ = false, spec.expert_output_norm = false;
    spec.mla_latent = 512, spec.mla_rope = 64, spec.mla_nope = 128, spec.mla_v = 128, spec.mtp_copy = true;
    dir = (std::filesystem::temp_directory_path() / "latentserve_random_mtp").string();
    if (absl::Status st = ls::bench::WriteRandomModel(spec, dir, 1); !st.ok()) {
      std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
      return 1;
    }
    draft_dir = "mtp";
  }
  auto model = ls::LoadModel(dir, &backend);
  std::unique_ptr<ls::Model> draft;
  if (!draft_dir.empty()) {
    auto d = draft_dir == "mtp" ? ls::LoadModel(dir, &backend, ls::LoadOptions{.next_token_layer = true})
                                : ls::LoadModel(draft_dir, &backend);
    if (!d.ok()) {
      std::fprintf(stderr, "%s\n", std::string(d.status().message()).c_str());
      return 1;
    }
    draft = std::move(*d);
  }
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  // The Genesis prompt where the model has a tokenizer, else 64 fixed pseudo-random ids.
  std::unique_ptr<ls::tok::Tokenizer> tokenizer;
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(streams));
  std::vector<int32_t>& prompt = prompts[0];
  if (std::filesystem::exists(dir + "/tokenizer.json") || std::filesystem::exists(dir + "/tiktoken.model")) {
    auto t = ls::tok::LoadTokenizer(dir);
    auto ids = t.ok() ? (*t)->Encode(kGenesis) : absl::StatusOr<std::vector<int32_t>>(t.status());
    if (!ids.ok()) {
      std::fprintf(stderr, "%s\n", std::string(ids.status().message()).c_str());
      return 1;
    }
    tokenizer = std::move(*t);
    for (auto& p : prompts) p = *ids;
  } else {
    std::mt19937 rng(7);
    for (auto& p : prompts)
      for (int i = 0; i < 64; ++i) p.push_back(static_cast<int32_t>(rng() % (*model)->config().vocab_size));
  }
  std::vector<double> rate[2], step_ms[2], propose_ms;
  uint64_t drafted = 0, accepted = 0, steps = 0;
  std::string cfg_method = "ngram";
  for (int round = 0; round < rounds; ++round)
    for (int on = 0; on < 2; ++on) {
      ls::EngineConfig cfg;
      cfg.speculative = {on ? k : 0, 1, 4, on ? draft.get() : nullptr};
      cfg.enable_prefix_caching = false;
      auto engine = ls::Engine::Create(model->get(), tokenizer.get(), cfg);
      if (!engine.ok()) {
        std::fprintf(stderr, "%s\n", std::string(engine.status().message()).c_str());
        return 1;
      }
      // One queue for every stream; the clock starts at the first token of any.
      ls::OutputQueue q;
      for (int s = 0; s < streams; ++s) {
        ls::Request r;
        r.id = "g" + std::to_string(s);
        r.prompt_ids = prompts[static_cast<size_t>(s)];
        r.params.max_tokens = max_tokens;
        r.params.temperature = 0;
        r.params.ignore_eos = true;
        if (absl::Status st = (*engine)->Submit(r, q.Callback()); !st.ok()) {
          std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
          return 1;
        }
      }
      ls::RequestOutput o = q.Next();
      const auto t0 = Clock::now();
      int tokens = static_cast<int>(o.token_ids.size()), finished = 0;
      for (;;) {
        if (o.finish_reason != ls::FinishReason::kNone && ++finished == streams) break;
        o = q.Next();
        tokens += static_cast<int>(o.token_ids.size());
      }
      rate[on].push_back((tokens - streams) / std::chrono::duration<double>(Clock::now() - t0).count());
      const ls::MetricsSnapshot m = (*engine)->Metrics();
      step_ms[on].push_back(1e3 * m.model_seconds / static_cast<double>(std::max<uint64_t>(m.steps, 1)));
      if (on) {
        cfg_method = (*engine)->speculative_method();
        propose_ms.push_back(1e3 * m.spec_propose_seconds / static_cast<double>(std::max<uint64_t>(m.steps, 1)));
        drafted += m.spec_draft_tokens;
        accepted += m.spec_accepted_tokens;
        steps += m.spec_steps;
      }
    }
  std::printf(
      "{\"benchmark\": \"speculative\", \"method\": \"%s\", \"model\": \"%s\", \"draft_model\": \"%s\", \"rounds\": "
      "%d, \"k\": %d, \"streams\": %d, \"prompt_tokens\": %zu, "
      "\"max_tokens\": %d, \"decode_tok_s_off\": %.1f, \"decode_tok_s_on\": %.1f, \"speedup\": %.2f, "
      "\"draft_tokens\": %llu, \"accepted_tokens\": %llu, \"acceptance\": %.3f, \"accepted_per_verify_step\": %.2f, "
      "\"model_ms_per_step_off\": %.3f, \"model_ms_per_step_on\": %.3f, \"propose_ms_per_step\": %.3f}\n",
      cfg_method.c_str(), dir.c_str(), draft_dir.c_str(), rounds, k, streams, prompt.size(), max_tokens,
      Median(rate[0]), Median(rate[1]), Median(rate[1]) / Median(rate[0]), static_cast<unsigned long long>(drafted),
      static_cast<unsigned long long>(accepted), drafted ? static_cast<double>(accepted) / drafted : 0.0,
      steps ? static_cast<double>(accepted) / steps : 0.0, Median(step_ms[0]), Median(step_ms[1]), Median(propose_ms));
  return 0;
}
