// Fuzz target: HTTP request JSON -> engine request (OpenAI completions and chat parsing,
// validation and prompt tokenization) against the shipped tiny model.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz/tiny_context.h"
#include "server/openai_protocol.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ls::fuzz::Tiny();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto& t = ls::fuzz::Tiny();
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  ls::server::ApiError err;
  auto r = ls::server::ParseRequest(data[0] & 1 ? ls::server::Endpoint::kChat : ls::server::Endpoint::kCompletions,
                                    body, *t.api, &err);
  if (!r) {
    if (err.http_status < 400 || err.http_status >= 500 || err.message.empty()) std::abort();
  } else if (r->prompts.empty() || r->prompts[0].empty() || !r->params.Validate(t.model->config().vocab_size).ok()) {
    std::abort();  // what parses must be a request the engine accepts
  }
  return 0;
}
