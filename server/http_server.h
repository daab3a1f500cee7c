// HttpServer: the OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions with SSE
// streaming, /v1/models, /health, /ready, /metrics), and the operator's /dashboard and
// /v1/expert_load (server/dashboard_routes.h), on Boost.Beast/Asio coroutines: a few I/O
// threads serve every connection, so thousands of streams cost no thread each. Optional TLS.
// Slow or idle clients cannot hold connections: incomplete request heads and idle kept-alive
// connections are closed on timeouts, and connections beyond a cap are refused with a 503.
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
  // A connection whose request head (TLS handshake included) is not complete this long after it
  // was accepted, or after the first byte of a later request, is closed.
  std::chrono::milliseconds header_timeout = std::chrono::seconds(30);
  // A kept-alive connection with no new request this long after its last response is closed.
  std::chrono::milliseconds keepalive_timeout = std::chrono::seconds(60);
  // Connections served at once; one more is answered 503 (JSON error, Connection: close) and closed.
  int max_connections = 10000;
  // Bytes of stored Responses API responses kept at most (0: none are kept; see ResponseStore).
  size_t responses_store_bytes = size_t{64} << 20;
  // The origins whose pages may call the API from a browser (CorsPolicy::Parse; empty: none).
  std::string allowed_origins;
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
