// ApiContext: what both front ends share — the engine, tokenizer and chat format, the model's
// generation defaults, the served model name, API keys, request-id generation, per-status request
// and HTTP connection counters for /metrics, and the structured request log. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "base/mutex.h"
#include "chat/chat_format.h"
#include "engine/engine.h"
#include "engine/generation_defaults.h"
#include "server/api_keys.h"
#include "structured/output_constraint.h"
#include "tokenizer/tokenizer.h"

namespace ls::server {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

struct RequestLogEntry {
  std::string id, api, endpoint;
  std::string client_request_id;  // the client's X-Request-Id, when it sent one
  int32_t prompt_tokens = 0, output_tokens = 0;
  double queue_s = 0, ttft_s = 0, total_s = 0;
  std::string status;  // HTTP status code or gRPC code name, or the finish reason
};

// HTTP connection accounting for /metrics (updated by the HTTP server's I/O threads).
struct HttpConnectionCounters {
  std::atomic<int64_t> open{0};                 // connections being served now
  std::atomic<uint64_t> accepted{0};            // served (not rejected) since start
  std::atomic<uint64_t> header_timeouts{0};     // closed: request head incomplete in time
  std::atomic<uint64_t> idle_timeouts{0};       // closed: kept alive without a new request in time
  std::atomic<uint64_t> rejected{0};            // answered 503 and closed: over --max_connections
};

class ApiContext {
 public:
  // `chat` may be null (a model without a tokenizer has no chat).
  ApiContext(Engine* engine, const tok::Tokenizer* tokenizer, std::shared_ptr<const chat::ChatFormat> chat,
             std::string model_name, std::string backend, ApiKeys keys, LogLevel level,
             GenerationDefaults generation_defaults = {})
      : engine_(engine), tokenizer_(tokenizer), chat_(std::move(chat)), model_name_(std::move(model_name)),
        backend_(std::move(backend)), keys_(std::move(keys)), level_(level),
        generation_defaults_(std::move(generation_defaults)) {}

  Engine& engine() const { return *engine_; }
  const tok::Tokenizer* tokenizer() const { return tokenizer_; }
  const chat::ChatFormat* chat() const { return chat_.get(); }
  // generation_config.json's defaults for fields a request leaves unset (empty with --generation_config none).
  const GenerationDefaults& generation_defaults() const { return generation_defaults_; }
  const std::string& model_name() const { return model_name_; }
  const std::string& backend() const { return backend_; }
  const ApiKeys& keys() const { return keys_; }
  HttpConnectionCounters& http_connections() const { return http_connections_; }
  bool ready() const { return !engine_->draining(); }
  // The compiled structured-output grammars over this model's vocabulary, made on first use (a
  // vocabulary's byte trie); null without a tokenizer.
  structured::GrammarCache* grammars() const;

  // A fresh id with the given prefix ("cmpl-", "chatcmpl-", "gen-").
  std::string NewRequestId(const char* prefix) const;
  // Counts a finished HTTP or gRPC request by its status for /metrics.
  void CountRequest(const std::string& api, const std::string& status);
  std::map<std::pair<std::string, std::string>, uint64_t> request_counts() const;

  void Log(LogLevel level, const std::string& event, const std::string& json_fields) const;
  void LogRequest(const RequestLogEntry& e) const;
  // A handler's exception (see UnexpectedFailure): logged as an error event with `failure`'s
  // message as its "error" field, and counted.
  void HandlerFailed(const std::string& event, const absl::Status& failure) const;
  uint64_t handler_failures() const { return handler_failures_.load(); }

 private:
  Engine* engine_;
  const tok::Tokenizer* tokenizer_;
  std::shared_ptr<const chat::ChatFormat> chat_;
  std::string model_name_;
  std::string backend_;
  ApiKeys keys_;
  LogLevel level_;
  GenerationDefaults generation_defaults_;
  mutable std::atomic<uint64_t> next_id_{1};
  mutable HttpConnectionCounters http_connections_;
  mutable std::atomic<uint64_t> handler_failures_{0};
  mutable std::once_flag grammars_once_;
  mutable std::unique_ptr<structured::GrammarCache> grammars_;
  mutable Mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // (api, status) -> requests
};

}  // namespace ls::server
