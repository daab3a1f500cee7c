// Fuzz target: HTTP request JSON -> engine request (OpenAI completions and chat parsing,
// validation and prompt tokenization) against the shipped tiny model.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "server/openai_protocol.h"

namespace {
std::unique_ptr<ls::CpuBackend> backend;
std::unique_ptr<ls::StableLatentMoe> model;
std::unique_ptr<ls::tok::Tokenizer> tok;
std::unique_ptr<ls::Engine> engine;
std::unique_ptr<ls::server::ApiContext> ctx;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  backend = std::make_unique<ls::CpuBackend>(1);
  auto m = ls::StableLatentMoe::Load(LS_FUZZ_MODEL_DIR, backend.get());
  auto t = ls::tok::Tokenizer::FromFile(LS_FUZZ_MODEL_DIR "/tokenizer.json");
  if (!m.ok() || !t.ok()) std::abort();
  model = std::move(*m);
  tok = std::move(*t);
  ls::EngineConfig cfg;
  cfg.kv_cache_bytes = 8 << 20;
  auto e = ls::Engine::Create(model.get(), tok.get(), cfg);
  if (!e.ok()) std::abort();
  engine = std::move(*e);
  ctx = std::make_unique<ls::server::ApiContext>(engine.get(), tok.get(), ls::tok::ChatTemplate::ChatML(), "tiny", "cpu",
                                                 ls::server::ApiKeys(), ls::server::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  ls::server::ApiError err;
  auto r = ls::server::ParseRequest(data[0] & 1 ? ls::server::Endpoint::kChat : ls::server::Endpoint::kCompletions,
                                    body, *ctx, &err);
  if (!r) {
    if (err.http_status < 400 || err.http_status >= 500 || err.message.empty()) std::abort();
  } else if (r->prompt_ids.empty() || !r->params.Validate(model->config().vocab_size).ok()) {
    std::abort();  // what parses must be a request the engine accepts
  }
  return 0;
}
