// Client: sends one benchmark request and records when its tokens arrive. Two implementations:
// OpenAI-compatible HTTP (completions or chat, streamed over SSE) and LatentServe gRPC.
// Each call is independent; a Client may be used from many threads at once.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tools/bench/stats.h"
#include "tools/bench/workload.h"

namespace ls::bench {

struct ClientOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint = "completions";  // HTTP: completions or chat
  std::string model;                     // HTTP "model" field (empty: omitted)
  std::string api_key;
  bool ignore_eos = true;
  double timeout_s = 600;
};

class Client {
 public:
  virtual ~Client() = default;
  // Sends `req`; times in the record are seconds since `t0`.
  virtual RequestRecord Send(const BenchRequest& req, std::chrono::steady_clock::time_point t0) = 0;
};

std::unique_ptr<Client> MakeHttpClient(const ClientOptions& o);
std::unique_ptr<Client> MakeGrpcClient(const ClientOptions& o);

}  // namespace ls::bench
