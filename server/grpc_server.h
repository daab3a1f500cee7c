// GrpcServer: the latentserve.v1.GenerationService (streaming Generate, Tokenize, Detokenize,
// GetModelInfo, GetExpertLoad), the standard grpc.health.v1.Health service and server reflection,
// with bearer-key authentication from the "authorization" metadata and optional TLS.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "server/api_context.h"

namespace ls::server {

struct GrpcOptions {
  std::string host = "0.0.0.0";
  int port = 50051;  // 0: pick a free port
  std::string tls_cert, tls_key;
};

class GrpcServer {
 public:
  GrpcServer(GrpcOptions options, ApiContext* ctx);
  ~GrpcServer();
  absl::Status Start();
  int port() const;
  // Health reports NOT_SERVING (draining); new Generate calls get UNAVAILABLE from the engine.
  void SetNotServing();
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ls::server
