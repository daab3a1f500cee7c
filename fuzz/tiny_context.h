// The shipped tiny model, its tokenizer, an idle Engine and an ApiContext over them, built once
// per fuzzing process for the request-conversion and HTTP server fuzz targets.
#pragma once

#include <cstdlib>
#include <memory>

#include "chat/jinja_chat_format.h"
#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/registry.h"
#include "server/api_context.h"
#include "tokenizer/load_tokenizer.h"

namespace ls::fuzz {

struct TinyContext {
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<server::ApiContext> api;
};

// A new context whose engine has `max_waiting` and whose API takes `keys`.
inline TinyContext* NewTiny(int32_t max_waiting, server::ApiKeys keys) {
  auto* c = new TinyContext();
  c->backend = std::make_unique<CpuBackend>(1);
  auto m = LoadModel(LS_FUZZ_MODEL_DIR, c->backend.get());
  auto t = tok::LoadTokenizerJsonFile(LS_FUZZ_MODEL_DIR "/tokenizer.json");
  if (!m.ok() || !t.ok()) std::abort();
  c->model = std::move(*m);
  c->tokenizer = std::move(*t);
  EngineConfig cfg;
  cfg.kv_cache_bytes = 8 << 20;
  cfg.max_waiting = max_waiting;
  auto e = Engine::Create(c->model.get(), c->tokenizer.get(), cfg);
  if (!e.ok()) std::abort();
  c->engine = std::move(*e);
  auto chat = std::make_shared<chat::JinjaChatFormat>(chat::ChatTemplate::ChatML(), c->tokenizer.get(),
                                                      &chat::HermesToolCallFormat(), /*think=*/true);
  c->api = std::make_unique<server::ApiContext>(c->engine.get(), c->tokenizer.get(), std::move(chat), "tiny", "cpu",
                                                std::move(keys), server::LogLevel::kError);
  return c;
}

// The request-conversion targets' context: an idle engine, no API keys.
inline TinyContext& Tiny() {
  static TinyContext* ctx = NewTiny(1024, server::ApiKeys());
  return *ctx;
}

}  // namespace ls::fuzz
