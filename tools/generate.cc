// latentserve-generate: greedy generation from token ids through the paged KV cache, printing the
// generated ids; optionally dumps the logits of every processed position as float32 .npy
// [prompt_len + max_tokens - 1, vocab] (row i = logits at position i).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "base/cli_usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/create_backend.h"
#include "models/kv_cache.h"
#include "models/registry.h"
#include "tools/npy.h"

ABSL_FLAG(std::string, model, "", "model directory (config.json + safetensors)");
ABSL_FLAG(std::string, prompt_ids, "", "comma-separated prompt token ids, e.g. 1,2,3");
ABSL_FLAG(int32_t, max_tokens, 16, "number of tokens to generate");
ABSL_FLAG(std::string, dump_logits, "", "write the logits of every position to this .npy file");
ABSL_FLAG(std::string, backend, "cpu", "compute backend: cpu, or cuda in builds with the CUDA kernels");
ABSL_FLAG(int32_t, threads, 0, "CPU threads (0 = all hardware threads)");
ABSL_FLAG(std::string, activation_dtype, "auto", "GEMM activations: auto, float32, bfloat16 or int8; as the server");
ABSL_FLAG(std::string, cpu_isa, "auto", "the widest instruction set of the CPU kernels; as the server");
ABSL_FLAG(bool, stop_at_eos, false, "stop at the model's eos token");
ABSL_FLAG(std::string, quantization, "none", "online quantization of the GEMM weights: none, int8, fp8, int4, w8a8, w4a8");
ABSL_FLAG(std::string, kv_cache_dtype, "auto",
          "KV cache elements: auto (bfloat16 for BF16 checkpoints where the backend supports it, else float32), "
          "float32 or bfloat16; as the server");

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "latentserve-generate: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  ls::ShowOwnFlagsInHelp();
  absl::SetProgramUsageMessage("Greedy generation from token ids.\n  latentserve-generate --model DIR --prompt-ids 1,2,3 --max-tokens N");
  ls::ParseCommandLineAcceptingDashes(argc, argv);  // --prompt-ids as well as --prompt_ids

  const std::string dir = absl::GetFlag(FLAGS_model);
  if (dir.empty()) return Fail("--model is required");
  std::vector<int32_t> prompt;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_prompt_ids), ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(s, &id)) return Fail("--prompt-ids: '" + std::string(s) + "' is not an integer");
    prompt.push_back(id);
  }
  if (prompt.empty()) return Fail("--prompt-ids must list at least one token id");
  const int32_t max_tokens = absl::GetFlag(FLAGS_max_tokens);
  if (max_tokens < 1) return Fail("--max-tokens must be at least 1");

  std::string backend_error;
  std::unique_ptr<ls::Backend> backend =
      ls::CreateBackend(
          {absl::GetFlag(FLAGS_backend), absl::GetFlag(FLAGS_threads), 0, absl::GetFlag(FLAGS_activation_dtype),
           absl::GetFlag(FLAGS_cpu_isa)},
          &backend_error);
  if (!backend) return Fail(backend_error);
  if (absl::GetFlag(FLAGS_backend) == "cpu")
    std::fprintf(stderr, "latentserve-generate: cpu_isa %s\n", ls::CpuIsaName().c_str());
  auto quantization = ls::ParseQuantScheme(absl::GetFlag(FLAGS_quantization));
  if (!quantization.ok()) return Fail(std::string(quantization.status().message()));
  auto model = ls::LoadModel(dir, backend.get(), ls::LoadOptions{*quantization});
  if (!model.ok()) return Fail(std::string(model.status().message()));
  if (auto s = ls::CheckActivationDtype(**model, absl::GetFlag(FLAGS_activation_dtype)); !s.ok())
    return Fail(std::string(s.message()));
  const ls::ModelConfig& cfg = (*model)->config();
  for (int32_t id : prompt)
    if (id < 0 || id >= cfg.vocab_size)
      return Fail("--prompt-ids: id " + std::to_string(id) + " is outside the vocabulary [0, " +
                  std::to_string(cfg.vocab_size) + ")");
  const int64_t total = static_cast<int64_t>(prompt.size()) + max_tokens;
  if (total > cfg.max_position_embeddings)
    return Fail("prompt + max tokens (" + std::to_string(total) + ") exceeds max_position_embeddings (" +
                std::to_string(cfg.max_position_embeddings) + ")");

  constexpr int32_t kBlock = 16;
  const int32_t blocks = static_cast<int32_t>((total + kBlock - 1) / kBlock);
  auto kv_requested = ls::ParseKvCacheDType(absl::GetFlag(FLAGS_kv_cache_dtype));
  if (!kv_requested.ok()) return Fail("--" + std::string(kv_requested.status().message()));
  auto kv_dtype = ls::ChooseKvCacheDType(*kv_requested, (*model)->dtype(), *backend);
  if (!kv_dtype.ok()) return Fail(std::string(kv_dtype.status().message()));
  ls::KvCache cache(backend.get(), (*model)->kv_layout(), blocks, kBlock, *kv_dtype, /*num_state_slots=*/1);
  ls::StepSequence seq;
  seq.state_slot = 0;
  for (int32_t b = 0; b < blocks; ++b) seq.block_table.push_back(b);

  const bool dump = !absl::GetFlag(FLAGS_dump_logits).empty();
  std::vector<float> all_logits, logits;
  ls::StepBatch step;
  step.tokens = prompt;
  seq.num_tokens = static_cast<int32_t>(prompt.size());
  seq.start_pos = 0;
  seq.all_logits = dump;
  step.seqs = {seq};
  std::vector<int32_t> out;
  for (int32_t i = 0; i < max_tokens; ++i) {
    if (auto s = (*model)->Forward(step, cache, &logits); !s.ok()) return Fail(std::string(s.message()));
    if (dump) all_logits.insert(all_logits.end(), logits.begin(), logits.end());
    const float* last = logits.data() + logits.size() - cfg.vocab_size;
    int32_t best = 0;
    for (int32_t v = 1; v < cfg.vocab_size; ++v)
      if (last[v] > last[best]) best = v;
    out.push_back(best);
    bool eos = false;
    for (int32_t e : cfg.eos_token_ids) eos |= best == e;
    if (eos && absl::GetFlag(FLAGS_stop_at_eos)) break;
    step.seqs[0].start_pos += step.seqs[0].num_tokens;
    step.seqs[0].num_tokens = 1;
    step.tokens = {best};
  }
  std::printf("%s\n", absl::StrJoin(out, ",").c_str());
  if (dump) {
    const int64_t rows = static_cast<int64_t>(all_logits.size()) / cfg.vocab_size;
    if (auto s = ls::WriteNpyF32(absl::GetFlag(FLAGS_dump_logits), {rows, cfg.vocab_size}, all_logits.data()); !s.ok())
      return Fail(std::string(s.message()));
  }
  return 0;
}
