// Structured output's cost: (1) compiling a large JSON schema (an object of 120 properties of
// mixed types) into a grammar, its first state and mask, cold and from the cache; (2) masking in
// the engine at 32 concurrent streams on a model (default models/tiny) under a JSON schema, as
// microseconds per constrained token and as a fraction of the step time, measured twice (the
// first run builds the grammar's automaton and masks, the second finds them cached), beside the
// same streams unconstrained. Prints JSON.
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/positional_args.h"
#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "structured/output_constraint.h"
#include "structured/vocabulary.h"
#include "tokenizer/load_tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string LargeSchema(int properties) {
  nlohmann::ordered_json props = nlohmann::ordered_json::object();
  const char* kinds[] = {"string", "integer", "boolean", "number", "enum", "array", "date"};
  for (int i = 0; i < properties; ++i) {
    nlohmann::ordered_json p;
    switch (i % 7) {
      case 0: p = {{"type", "string"}, {"maxLength", 40}}; break;
      case 1: p = {{"type", "integer"}, {"minimum", -1000}, {"maximum", 100000}}; break;
      case 2: p = {{"type", "boolean"}}; break;
      case 3: p = {{"type", "number"}}; break;
      case 4: p = {{"enum", {"low", "medium", "high"}}}; break;
      case 5: p = {{"type", "array"}, {"items", {{"type", "string"}, {"maxLength", 8}}}, {"maxItems", 5}}; break;
      default: p = {{"type", "string"}, {"format", "date"}}; break;
    }
    props[std::string("field_") + kinds[i % 7] + "_" + std::to_string(i)] = p;
  }
  nlohmann::ordered_json required = nlohmann::ordered_json::array();
  for (auto it = props.begin(); it != props.end(); ++it)
    if (required.size() < 60) required.push_back(it.key());
  return nlohmann::ordered_json{{"type", "object"}, {"properties", props}, {"required", required}}.dump();
}

const char* kServingSchema = R"({"type":"object","properties":{
  "name":{"type":"string","maxLength":24},"age":{"type":"integer","minimum":0,"maximum":150},
  "email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":6},
  "address":{"type":"object","properties":{"street":{"type":"string","maxLength":32},"zip":{"type":"string","pattern":"[0-9]{5}"}},
             "required":["street","zip"]},
  "active":{"type":"boolean"},"score":{"type":"number"}},"required":["name","age","email","tags","address","active"]})";

struct Run {
  double seconds = 0, step_seconds = 0, grammar_seconds = 0;
  uint64_t steps = 0, tokens = 0, grammar_tokens = 0;
};

Run Serve(ls::Engine& engine, int streams, int max_tokens, const std::shared_ptr<ls::structured::CompiledGrammar>& g,
          int round) {
  const ls::MetricsSnapshot before = engine.Metrics();
  std::vector<std::unique_ptr<ls::OutputQueue>> qs;
  const auto t0 = Clock::now();
  for (int i = 0; i < streams; ++i) {
    ls::Request r;
    r.id = "bench-" + std::to_string(round) + "-" + std::to_string(i);
    r.prompt_ids = {5, 17, 42, 99, 7, 300 + i};
    r.params.temperature = 1.0f;
    r.params.seed = 1000 * round + i;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = g == nullptr;  // free streams run the whole length, as the constrained ones mostly do
    r.params.grammar = g;
    qs.push_back(std::make_unique<ls::OutputQueue>());
    if (auto st = engine.Submit(r, qs.back()->Callback()); !st.ok()) {
      std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
      std::abort();
    }
  }
  Run out;
  for (auto& q : qs) out.tokens += q->WaitFinal().completion_tokens;
  out.seconds = Since(t0);
  const ls::MetricsSnapshot after = engine.Metrics();
  out.steps = after.steps - before.steps;
  out.step_seconds = after.step_seconds - before.step_seconds;
  out.grammar_seconds = after.grammar_seconds - before.grammar_seconds;
  out.grammar_tokens = after.grammar_tokens - before.grammar_tokens;
  return out;
}

void Print(const char* name, const Run& r, bool last) {
  std::printf("    \"%s\": {\"tokens\": %llu, \"steps\": %llu, \"mean_step_ms\": %.3f, \"tokens_per_s\": %.1f, "
              "\"mask_us_per_token\": %.2f, \"mask_fraction_of_step\": %.4f}%s\n",
              name, static_cast<unsigned long long>(r.tokens), static_cast<unsigned long long>(r.steps),
              1e3 * r.step_seconds / std::max<uint64_t>(1, r.steps), r.tokens / r.seconds,
              r.grammar_tokens ? 1e6 * r.grammar_seconds / r.grammar_tokens : 0.0,
              r.step_seconds > 0 ? r.grammar_seconds / r.step_seconds : 0.0, last ? "" : ",");
}

}  // namespace

int main(int argc, char** argv) {
  ls::bench::PositionalArgs args(argc, argv, "structured_output_bench [MODEL_DIR]");
  const std::string dir = args.Str("MODEL_DIR", "models/tiny");
  args.End();
  ls::CpuBackend backend(0);
  auto model = ls::LoadModel(dir, &backend);
  auto tokenizer = ls::tok::LoadTokenizer(dir);
  if (!model.ok() || !tokenizer.ok()) {
    std::fprintf(stderr, "%s\n", std::string((model.ok() ? tokenizer.status() : model.status()).message()).c_str());
    return 1;
  }
  const int64_t rows = (*model)->config().vocab_size;
  ls::structured::GrammarCache cache(ls::structured::VocabularyBytes(**tokenizer, rows));

  // (1) A large schema: compile, first state and mask; then the cache.
  ls::structured::OutputConstraint large{ls::structured::OutputConstraint::Kind::kJsonSchema, LargeSchema(120), {}};
  auto t = Clock::now();
  auto g = cache.Get(large);
  const double compile_s = Since(t);
  if (!g.ok()) {
    std::fprintf(stderr, "%s\n", std::string(g.status().message()).c_str());
    return 1;
  }
  t = Clock::now();
  (*g)->Mask((*g)->Initial());
  const double first_mask_s = Since(t);
  t = Clock::now();
  auto again = cache.Get(large);
  const double cached_s = Since(t);

  // (2) Masking in the engine at 32 streams.
  ls::EngineConfig cfg;
  cfg.scheduler.max_num_seqs = 64;
  auto engine = ls::Engine::Create(model->get(), tokenizer->get(), cfg);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  ls::structured::OutputConstraint serving{ls::structured::OutputConstraint::Kind::kJsonSchema, kServingSchema, {}};
  auto sg = cache.Get(serving);
  if (!sg.ok()) return 1;
  const int streams = 32, max_tokens = 240;
  Serve(**engine, streams, 16, nullptr, 0);  // warm-up: buffers at their steady-state sizes
  const Run free_run = Serve(**engine, streams, max_tokens, nullptr, 1);
  const Run cold = Serve(**engine, streams, max_tokens, *sg, 2);
  const Run warm = Serve(**engine, streams, max_tokens, *sg, 3);
  std::printf("{\n  \"benchmark\": \"structured_output\",\n  \"model\": \"%s\",\n  \"vocab\": %lld,\n", dir.c_str(),
              static_cast<long long>(rows));
  std::printf("  \"large_schema\": {\"properties\": 120, \"states_built\": %zu, \"compile_ms\": %.2f, "
              "\"first_mask_ms\": %.2f, \"cached_lookup_us\": %.2f},\n",
              (*g)->num_states(), 1e3 * compile_s, 1e3 * first_mask_s, 1e6 * cached_s);
  std::printf("  \"streams\": %d,\n  \"max_tokens\": %d,\n  \"serving\": {\n", streams, max_tokens);
  Print("unconstrained", free_run, false);
  Print("json_schema_first", cold, false);
  Print("json_schema_cached", warm, true);
  std::printf("  },\n  \"automaton\": {\"states\": %zu, \"masks\": %zu}\n}\n", (*sg)->num_states(), (*sg)->num_masks());
  (void)again;
  return 0;
}
