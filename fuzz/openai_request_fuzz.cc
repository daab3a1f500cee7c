// Fuzz target: HTTP request JSON -> engine request (OpenAI completions, chat and Responses parsing,
// validation and prompt tokenization) against the shipped tiny model. The first byte chooses the
// endpoint: bit 2 set, the tokenizer endpoints (bit 0: /detokenize, else /tokenize), which answer
// 200 or a 4xx with its message; else bit 1 set, /v1/responses (read against a store holding one
// earlier response, "resp_fuzz", so that previous_response_id continues a conversation); else bit
// 0, chat or completions.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "fuzz/tiny_context.h"
#include "server/openai_protocol.h"
#include "server/response_store.h"
#include "server/responses_api.h"
#include "server/tokenize_api.h"

namespace {

ls::server::ResponseStore& Store() {
  static ls::server::ResponseStore* store = [] {
    auto* s = new ls::server::ResponseStore(1 << 20);
    s->Put("resp_fuzz", {R"({"id":"resp_fuzz","object":"response","status":"completed"})",
                         R"([{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."}])",
                         R"([{"id":"msg_1","type":"message","role":"user","content":"Hi"}])"});
    return s;
  }();
  return *store;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ls::fuzz::Tiny();
  Store();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto& t = ls::fuzz::Tiny();
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 4) {
    const ls::server::TokenizeReply reply =
        data[0] & 1 ? ls::server::Detokenize(body, *t.api) : ls::server::Tokenize(body, *t.api);
    if (reply.http_status == 200) return 0;
    const auto error = reply.body.find("error");
    if (reply.http_status < 400 || reply.http_status >= 500 || error == reply.body.end() ||
        !error->contains("message") || !(*error)["message"].is_string() ||
        (*error)["message"].get<std::string>().empty())
      std::abort();  // a refusal is a 4xx that says what was wrong
    return 0;
  }
  ls::server::ApiError err;
  std::optional<ls::server::ParsedRequest> r;
  if (data[0] & 2) {
    const std::optional<ls::server::ResponsesRequest> req = ls::server::ReadResponsesRequest(body, &Store(), &err);
    if (req) r = ls::server::ParseResponsesRequest(*req, *t.api, &err);
  } else {
    r = ls::server::ParseRequest(data[0] & 1 ? ls::server::Endpoint::kChat : ls::server::Endpoint::kCompletions, body,
                                 *t.api, &err);
  }
  if (!r) {
    if (err.http_status < 400 || err.http_status >= 500 || err.message.empty()) std::abort();
  } else if (r->prompts.empty() || r->prompts[0].empty() || !r->params.Validate(t.model->config().vocab_size).ok()) {
    std::abort();  // what parses must be a request the engine accepts
  }
  return 0;
}
