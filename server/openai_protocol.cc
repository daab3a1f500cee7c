// OpenAI protocol parsing and formatting.
#include "server/openai_protocol.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace ls::server {
namespace {

using json = nlohmann::json;

// Field readers: absent or null fields leave `out` untouched; wrong types fail naming the field.
class Fields {
 public:
  Fields(const json& j, ApiError* err) : j_(j), err_(err) {}
  bool ok() const { return ok_; }
  bool Fail(const std::string& field, const std::string& msg) {
    if (ok_) *err_ = ApiError{400, msg, field};
    ok_ = false;
    return false;
  }
  const json* Get(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  void Number(const char* key, float* out) {
    if (const json* v = Get(key)) {
      if (!v->is_number()) return void(Fail(key, absl::StrCat("'", key, "' must be a number")));
      const double d = v->get<double>();
      if (!std::isfinite(d)) return void(Fail(key, absl::StrCat("'", key, "' must be finite")));
      *out = static_cast<float>(d);
    }
  }
  template <typename T>
  void Int(const char* key, T* out, int64_t lo, int64_t hi) {
    if (const json* v = Get(key)) {
      if (!v->is_number_integer()) return void(Fail(key, absl::StrCat("'", key, "' must be an integer")));
      const int64_t x = v->get<int64_t>();
      if (x < lo || x > hi)
        return void(Fail(key, absl::StrCat("'", key, "' must be between ", lo, " and ", hi, ", got ", x)));
      *out = static_cast<T>(x);
    }
  }
  void Bool(const char* key, bool* out) {
    if (const json* v = Get(key)) {
      if (!v->is_boolean()) return void(Fail(key, absl::StrCat("'", key, "' must be true or false")));
      *out = v->get<bool>();
    }
  }

 private:
  const json& j_;
  ApiError* err_;
  bool ok_ = true;
};

bool IsValidUtf8(const std::string& s) { return tok::FindInvalidUtf8(s) == std::string::npos; }

// Reads "stop": a string or a list of strings.
void ReadStop(Fields& f, std::vector<std::string>* out) {
  const json* v = f.Get("stop");
  if (!v) return;
  if (v->is_string()) {
    out->push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const auto& s : *v) {
      if (!s.is_string()) return void(f.Fail("stop", "'stop' must be a string or a list of strings"));
      out->push_back(s.get<std::string>());
    }
  } else {
    return void(f.Fail("stop", "'stop' must be a string or a list of strings"));
  }
  for (const auto& s : *out)
    if (s.empty()) return void(f.Fail("stop", "'stop' strings must not be empty"));
}

// Reads the completion prompt: a string, a list of token ids, or a one-element list of either.
bool ReadPrompt(Fields& f, const json& j, const ApiContext& ctx, std::vector<int32_t>* ids) {
  const json* p = f.Get("prompt");
  if (!p) return f.Fail("prompt", "'prompt' is required");
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    if (!ctx.tokenizer()) return f.Fail("prompt", "this model has no tokenizer: send the prompt as token ids");
    const std::string text = p->get<std::string>();
    if (text.empty()) return f.Fail("prompt", "'prompt' must not be empty");
    auto enc = ctx.tokenizer()->Encode(text);
    if (!enc.ok()) return f.Fail("prompt", absl::StrCat("'prompt': ", enc.status().message()));
    *ids = std::move(*enc);
    return true;
  }
  if (p->is_array()) {
    if (p->empty()) return f.Fail("prompt", "'prompt' must not be empty");
    for (const auto& t : *p) {
      if (!t.is_number_integer()) {
        return f.Fail("prompt", t.is_string() || t.is_array()
                                    ? "batched prompts are not supported: send one prompt per request"
                                    : "'prompt' must be a string or a list of token ids");
      }
      const int64_t id = t.get<int64_t>();
      const int64_t V = ctx.engine().model_config().vocab_size;
      if (id < 0 || id >= V)
        return f.Fail("prompt", absl::StrCat("'prompt': token id ", id, " is outside the vocabulary [0, ", V, ")"));
      ids->push_back(static_cast<int32_t>(id));
    }
    return true;
  }
  (void)j;
  return f.Fail("prompt", "'prompt' must be a string or a list of token ids");
}

// Reads chat messages, renders them with the chat template and tokenizes.
bool ReadChat(Fields& f, const ApiContext& ctx, std::vector<int32_t>* ids) {
  const json* m = f.Get("messages");
  if (!m) return f.Fail("messages", "'messages' is required");
  if (!m->is_array()) return f.Fail("messages", "'messages' must be a list");
  if (m->empty()) return f.Fail("messages", "'messages' must not be empty");
  if (!ctx.tokenizer()) return f.Fail("messages", "this model has no tokenizer, so chat is unavailable");
  std::vector<tok::ChatMessage> msgs;
  for (size_t i = 0; i < m->size(); ++i) {
    const json& e = (*m)[i];
    const std::string where = absl::StrCat("messages[", i, "]");
    if (!e.is_object()) return f.Fail(where, absl::StrCat("'", where, "' must be an object"));
    auto role = e.find("role");
    if (role == e.end() || !role->is_string()) return f.Fail(where + ".role", absl::StrCat("'", where, ".role' is required"));
    const std::string r = *role;
    if (r != "system" && r != "user" && r != "assistant" && r != "developer")
      return f.Fail(where + ".role", absl::StrCat("'", where, ".role' must be system, developer, user or assistant, got '", r, "'"));
    std::string content;
    auto c = e.find("content");
    if (c == e.end() || c->is_null()) {
      if (r != "assistant") return f.Fail(where + ".content", absl::StrCat("'", where, ".content' is required"));
    } else if (c->is_string()) {
      content = *c;
    } else if (c->is_array()) {
      for (const auto& part : *c) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
          return f.Fail(where + ".content", absl::StrCat("'", where, ".content' parts must be {\"type\": \"text\", \"text\": ...}"));
        content += part["text"].get<std::string>();
      }
    } else {
      return f.Fail(where + ".content", absl::StrCat("'", where, ".content' must be a string or a list of text parts"));
    }
    msgs.push_back({r == "developer" ? "system" : r, std::move(content)});
  }
  auto text = ctx.chat_template().Render(msgs, /*add_generation_prompt=*/true);
  if (!text.ok()) return f.Fail("messages", std::string(text.status().message()));
  // The template wrote BOS and the control tokens as text: match them, add no post-processor ids.
  auto enc = ctx.tokenizer()->Encode(*text, tok::EncodeOptions::RenderedChat());
  if (!enc.ok()) return f.Fail("messages", absl::StrCat("'messages': ", enc.status().message()));
  *ids = std::move(*enc);
  return true;
}

json TokenText(const ApiContext& ctx, int32_t id) {
  std::string bytes;
  if (ctx.tokenizer()) ctx.tokenizer()->AppendTokenBytes(id, false, &bytes);
  std::string text;
  tok::DecodeUtf8Lossy(bytes, true, &text);
  return text;
}

json Bytes(const ApiContext& ctx, int32_t id) {
  std::string bytes;
  if (ctx.tokenizer()) ctx.tokenizer()->AppendTokenBytes(id, false, &bytes);
  json b = json::array();
  for (unsigned char c : bytes) b.push_back(static_cast<int>(c));
  return b;
}

json LogprobsJson(const ParsedRequest& r, const std::vector<TokenLogprob>& lps, const ApiContext& ctx) {
  if (!r.params.logprobs) return nullptr;
  if (r.endpoint == Endpoint::kChat) {
    json content = json::array();
    for (const auto& lp : lps) {
      json top = json::array();
      for (auto [id, l] : lp.top) top.push_back({{"token", TokenText(ctx, id)}, {"logprob", l}, {"bytes", Bytes(ctx, id)}});
      content.push_back({{"token", TokenText(ctx, lp.token_id)}, {"logprob", lp.logprob}, {"bytes", Bytes(ctx, lp.token_id)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_lps = json::array(), tops = json::array();
  for (const auto& lp : lps) {
    tokens.push_back(TokenText(ctx, lp.token_id));
    token_lps.push_back(lp.logprob);
    json top = json::object();
    for (auto [id, l] : lp.top) top[TokenText(ctx, id).get<std::string>()] = l;
    tops.push_back(top);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}};
}

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

}  // namespace

std::optional<ParsedRequest> ParseRequest(Endpoint endpoint, const std::string& body, const ApiContext& ctx,
                                          ApiError* error) {
  if (!IsValidUtf8(body)) {
    *error = ApiError{400, "request body is not valid UTF-8", ""};
    return std::nullopt;
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *error = ApiError{400, "request body is not valid JSON", ""};
    return std::nullopt;
  }
  if (!j.is_object()) {
    *error = ApiError{400, "request body must be a JSON object", ""};
    return std::nullopt;
  }
  ParsedRequest r;
  r.endpoint = endpoint;
  Fields f(j, error);
  if (const json* m = f.Get("model")) {
    if (!m->is_string()) {
      f.Fail("model", "'model' must be a string");
    } else if (m->get<std::string>() != ctx.model_name()) {
      *error = ApiError{404, absl::StrCat("The model '", m->get<std::string>(), "' does not exist; this server serves '",
                                          ctx.model_name(), "'"), "model", "not_found_error"};
      return std::nullopt;
    }
  }
  SamplingParams& p = r.params;
  if (endpoint == Endpoint::kChat) p.max_tokens = -1;  // default: the rest of the context
  f.Number("temperature", &p.temperature);
  f.Number("top_p", &p.top_p);
  f.Int("top_k", &p.top_k, -1, 1 << 30);
  f.Number("min_p", &p.min_p);
  f.Number("repetition_penalty", &p.repetition_penalty);
  f.Number("presence_penalty", &p.presence_penalty);
  f.Number("frequency_penalty", &p.frequency_penalty);
  f.Int("max_tokens", &p.max_tokens, 1, 1 << 30);
  if (endpoint == Endpoint::kChat) f.Int("max_completion_tokens", &p.max_tokens, 1, 1 << 30);
  f.Int("min_tokens", &p.min_tokens, 0, 1 << 30);
  f.Int("n", &r.n, 1, kMaxChoices);
  f.Int("priority", &r.priority, -1000000, 1000000);
  f.Bool("stream", &r.stream);
  f.Bool("ignore_eos", &p.ignore_eos);
  f.Bool("skip_special_tokens", &p.skip_special_tokens);
  if (const json* s = f.Get("seed")) {
    if (!s->is_number_integer()) {
      f.Fail("seed", "'seed' must be an integer");
    } else {
      p.seed = static_cast<uint64_t>(s->get<int64_t>());
    }
  }
  ReadStop(f, &p.stop);
  if (const json* s = f.Get("stop_token_ids")) {
    if (!s->is_array()) f.Fail("stop_token_ids", "'stop_token_ids' must be a list of integers");
    else
      for (const auto& id : *s) {
        if (!id.is_number_integer()) {
          f.Fail("stop_token_ids", "'stop_token_ids' must be a list of integers");
          break;
        }
        p.stop_token_ids.push_back(id.get<int32_t>());
      }
  }
  if (const json* so = f.Get("stream_options")) {
    if (!so->is_object()) f.Fail("stream_options", "'stream_options' must be an object");
    else if (so->contains("include_usage")) {
      if (!(*so)["include_usage"].is_boolean()) f.Fail("stream_options.include_usage", "'stream_options.include_usage' must be true or false");
      else r.include_usage = (*so)["include_usage"].get<bool>();
    }
  }
  if (endpoint == Endpoint::kChat) {
    f.Bool("logprobs", &r.chat_logprobs);
    int32_t top = 0;
    f.Int("top_logprobs", &top, 0, 20);
    if (f.ok() && f.Get("top_logprobs") && !r.chat_logprobs) f.Fail("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (r.chat_logprobs) p.logprobs = top;
  } else {
    int32_t lp = -1;
    f.Int("logprobs", &lp, 0, 20);
    if (lp >= 0) p.logprobs = lp;
    if (const json* e = f.Get("echo"); e && e->is_boolean() && e->get<bool>()) f.Fail("echo", "'echo' is not supported");
    if (const json* s = f.Get("suffix"); s) f.Fail("suffix", "'suffix' is not supported");
    int32_t best_of = 1;
    f.Int("best_of", &best_of, 1, 1);
  }
  if (const json* lb = f.Get("logit_bias"); lb && !(lb->is_object() && lb->empty()))
    f.Fail("logit_bias", "'logit_bias' is not supported");
  if (!f.ok()) return std::nullopt;
  if (endpoint == Endpoint::kChat ? !ReadChat(f, ctx, &r.prompt_ids) : !ReadPrompt(f, j, ctx, &r.prompt_ids))
    return std::nullopt;

  const int32_t max_len = ctx.engine().max_model_len();
  const int32_t prompt_len = static_cast<int32_t>(r.prompt_ids.size());
  if (prompt_len >= max_len) {
    *error = ApiError{400, absl::StrCat("the prompt is ", prompt_len, " tokens long, but this model's context length is ",
                                        max_len, " tokens"), endpoint == Endpoint::kChat ? "messages" : "prompt"};
    return std::nullopt;
  }
  if (p.max_tokens < 0) p.max_tokens = max_len - prompt_len;
  if (prompt_len + p.max_tokens > max_len) {
    *error = ApiError{400, absl::StrCat("prompt (", prompt_len, " tokens) + max_tokens (", p.max_tokens,
                                        ") exceeds this model's context length of ", max_len, " tokens"), "max_tokens"};
    return std::nullopt;
  }
  if (auto st = p.Validate(ctx.engine().model_config().vocab_size); !st.ok()) {
    std::string msg(st.message());
    *error = ApiError{400, msg, msg.substr(0, msg.find(' '))};
    return std::nullopt;
  }
  return r;
}

json ErrorBody(const ApiError& e) {
  return {{"error", {{"message", e.message}, {"type", e.type}, {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                     {"code", e.http_status}}}};
}

json FinishReasonJson(FinishReason f) {
  switch (f) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: return nullptr;
  }
  return nullptr;
}

json CompletionBody(const ParsedRequest& r, const std::string& id, int64_t created, const std::string& model,
                    const std::vector<Choice>& choices, const Usage& usage, const ApiContext& ctx) {
  json cs = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    if (r.endpoint == Endpoint::kChat) {
      cs.push_back({{"index", i},
                    {"message", {{"role", "assistant"}, {"content", c.text}}},
                    {"logprobs", LogprobsJson(r, c.logprobs, ctx)},
                    {"finish_reason", FinishReasonJson(c.finish)}});
    } else {
      cs.push_back({{"index", i}, {"text", c.text}, {"logprobs", LogprobsJson(r, c.logprobs, ctx)},
                    {"finish_reason", FinishReasonJson(c.finish)}});
    }
  }
  return {{"id", id},
          {"object", r.endpoint == Endpoint::kChat ? "chat.completion" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", cs},
          {"usage", UsageJson(usage)}};
}

json StreamChunk(const ParsedRequest& r, const std::string& id, int64_t created, const std::string& model, int32_t index,
                 const Choice& delta, bool first, const ApiContext& ctx) {
  json choice;
  if (r.endpoint == Endpoint::kChat) {
    json d = json::object();
    if (first) d["role"] = "assistant";
    if (!delta.text.empty() || (first && delta.finish == FinishReason::kNone)) d["content"] = delta.text;
    choice = {{"index", index}, {"delta", d}, {"logprobs", LogprobsJson(r, delta.logprobs, ctx)},
              {"finish_reason", FinishReasonJson(delta.finish)}};
  } else {
    choice = {{"index", index}, {"text", delta.text}, {"logprobs", LogprobsJson(r, delta.logprobs, ctx)},
              {"finish_reason", FinishReasonJson(delta.finish)}};
  }
  return {{"id", id},
          {"object", r.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})}};
}

json UsageChunk(const ParsedRequest& r, const std::string& id, int64_t created, const std::string& model,
                const Usage& usage) {
  return {{"id", id},
          {"object", r.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array()},
          {"usage", UsageJson(usage)}};
}

}  // namespace ls::server
