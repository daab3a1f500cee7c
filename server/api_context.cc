// ApiContext: ids, counters and JSON log lines on stderr.
#include "server/api_context.h"

#include <chrono>
#include <cstdio>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "structured/vocabulary.h"

namespace ls::server {
namespace {

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "info";
}

// A JSON object's members as a log line's fields (without its braces); invalid UTF-8 as U+FFFD.
std::string LogFields(const nlohmann::json& j) {
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.substr(1, text.size() - 2);
}

}  // namespace

structured::GrammarCache* ApiContext::grammars() const {
  if (!tokenizer_) return nullptr;
  std::call_once(grammars_once_, [this] {
    grammars_ = std::make_unique<structured::GrammarCache>(
        structured::VocabularyBytes(*tokenizer_, engine_->model_config().vocab_size));
  });
  return grammars_.get();
}

std::string ApiContext::NewRequestId(const char* prefix) const {
  static const uint64_t salt = std::random_device{}();
  return absl::StrFormat("%s%08x%08x", prefix, static_cast<uint32_t>(salt), static_cast<uint32_t>(next_id_++));
}

void ApiContext::CountRequest(const std::string& api, const std::string& status) {
  MutexLock lock(&mu_);
  ++counts_[{api, status}];
}

std::map<std::pair<std::string, std::string>, uint64_t> ApiContext::request_counts() const {
  MutexLock lock(&mu_);
  return counts_;
}

void ApiContext::Log(LogLevel level, const std::string& event, const std::string& json_fields) const {
  if (level < level_) return;
  const double ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string line = absl::StrFormat("{\"ts\":%.3f,\"level\":\"%s\",\"event\":\"%s\"", ts, LevelName(level), event);
  if (!json_fields.empty()) absl::StrAppend(&line, ",", json_fields);
  line += "}\n";
  std::fputs(line.c_str(), stderr);
}

void ApiContext::LogRequest(const RequestLogEntry& e) const {
  nlohmann::json j = {{"id", e.id},
                      {"api", e.api},
                      {"endpoint", e.endpoint},
                      {"prompt_tokens", e.prompt_tokens},
                      {"output_tokens", e.output_tokens},
                      {"queue_ms", std::round(e.queue_s * 1e4) / 10},
                      {"ttft_ms", std::round(e.ttft_s * 1e4) / 10},
                      {"total_ms", std::round(e.total_s * 1e4) / 10},
                      {"status", e.status}};
  if (!e.client_request_id.empty()) j["client_request_id"] = e.client_request_id;
  Log(LogLevel::kInfo, "request", LogFields(j));
}

void ApiContext::HandlerFailed(const std::string& event, const absl::Status& failure) const {
  ++handler_failures_;
  Log(LogLevel::kError, event, LogFields({{"error", failure.message()}}));
}

}  // namespace ls::server
