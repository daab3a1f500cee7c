// Fuzz target: gRPC GenerateRequest bytes -> engine request (protobuf parsing, prompt conversion,
// sampling validation) against the shipped tiny model's tokenizer.
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "server/grpc_request.h"

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
  latentserve::v1::GenerateRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  ls::Request r;
  grpc::Status st = ls::server::GrpcToEngineRequest(req, *ctx, &r);
  if (!st.ok() && st.error_code() != grpc::StatusCode::INVALID_ARGUMENT) std::abort();
  if (st.ok()) (void)r.params.Validate(model->config().vocab_size);
  return 0;
}
