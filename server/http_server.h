// HttpServer: the OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions with SSE
// streaming, /v1/models, /health, /ready, /metrics) on Boost.Beast/Asio coroutines: a few I/O
// threads serve every connection, so thousands of streams cost no thread each. Optional TLS.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "server/api_context.h"

namespace ls::server {

struct HttpOptions {
  std::string host = "0.0.0.0";
  int port = 8000;  // 0: pick a free port
  int threads = 2;
  size_t max_body_bytes = size_t{4} << 20;
  std::string tls_cert, tls_key;  // both set: HTTPS
};

class HttpServer {
 public:
  HttpServer(HttpOptions options, ApiContext* ctx);
  ~HttpServer();
  absl::Status Start();
  int port() const;
  // Stops accepting connections, lets generation requests already read finish writing their
  // responses for up to `grace`, then closes every connection.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ls::server
