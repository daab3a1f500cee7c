// Fuzz target: gRPC GenerateRequest bytes -> engine request (protobuf parsing, prompt conversion,
// sampling validation) against the shipped tiny model's tokenizer.
#include <cstdint>
#include <cstdlib>

#include "fuzz/tiny_context.h"
#include "server/grpc_request.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ls::fuzz::Tiny();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  latentserve::v1::GenerateRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto& t = ls::fuzz::Tiny();
  ls::Request r;
  grpc::Status st = ls::server::GrpcToEngineRequest(req, *t.api, &r);
  if (!st.ok() && st.error_code() != grpc::StatusCode::INVALID_ARGUMENT) std::abort();
  if (st.ok()) (void)r.params.Validate(t.model->config().vocab_size);
  return 0;
}
