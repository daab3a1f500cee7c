// /tokenize and /detokenize.
#include "server/tokenize_api.h"

#include "absl/strings/str_cat.h"
#include "server/chat_request.h"
#include "server/openai_protocol.h"
#include "tokenizer/utf8.h"

namespace ls::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// (Names of their own: these files may be compiled as one unit with the other request readers.)
TokenizeReply Refusal(ApiError e) { return {e.http_status, ErrorBody(e)}; }
TokenizeReply Refused(std::string message, std::string param) {
  return Refusal(ApiError{400, std::move(message), std::move(param)});
}

// The body as a JSON object whose fields are all among `known`; else the error.
std::optional<TokenizeReply> ReadBody(const std::string& body, const char* path,
                                      std::initializer_list<const char*> known, ojson* j, const ApiContext& ctx) {
  if (tok::FindInvalidUtf8(body) != std::string::npos) return Refused("request body is not valid UTF-8", "");
  *j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j->is_discarded()) return Refused("request body is not valid JSON", "");
  if (!j->is_object()) return Refused("request body must be a JSON object", "");
  for (const auto& [key, value] : j->items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) return Refused(absl::StrCat("'", key, "' is not a request field of ", path), key);
  }
  if (auto m = j->find("model"); m != j->end() && !m->is_null()) {
    if (!m->is_string()) return Refused("'model' must be a string", "model");
    if (m->get<std::string>() != ctx.model_name())
      return Refusal(ApiError{404,
                              absl::StrCat("The model '", m->get<std::string>(),
                                           "' does not exist; this server serves '", ctx.model_name(), "'"),
                              "model", "not_found_error"});
  }
  if (!ctx.tokenizer()) return Refusal(ApiError{400, "this model has no tokenizer", "", "invalid_request_error"});
  return std::nullopt;
}

// An optional boolean field.
bool ReadBool(const ojson& j, const char* key, std::optional<bool>* out, ApiError* err) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    *err = ApiError{400, absl::StrCat("'", key, "' must be true or false"), key};
    return false;
  }
  *out = it->get<bool>();
  return true;
}

}  // namespace

TokenizeReply Tokenize(const std::string& body, const ApiContext& ctx) {
  ojson j;
  if (auto e = ReadBody(body, "/tokenize",
                        {"model", "prompt", "messages", "add_special_tokens", "add_generation_prompt",
                         "continue_final_message", "tools", "chat_template_kwargs", "documents", "return_token_strs"},
                        &j, ctx))
    return *e;
  ApiError err;
  std::optional<bool> add_special, add_generation, cont, token_strs;
  if (!ReadBool(j, "add_special_tokens", &add_special, &err) ||
      !ReadBool(j, "add_generation_prompt", &add_generation, &err) ||
      !ReadBool(j, "continue_final_message", &cont, &err) || !ReadBool(j, "return_token_strs", &token_strs, &err))
    return Refusal(err);
  const auto prompt = j.find("prompt");
  const auto messages = j.find("messages");
  const bool has_prompt = prompt != j.end() && !prompt->is_null();
  const bool has_messages = messages != j.end() && !messages->is_null();
  if (has_prompt == has_messages)
    return Refused("send either 'prompt' or 'messages'", has_prompt ? "messages" : "prompt");
  std::vector<int32_t> ids;
  if (has_prompt) {
    for (const char* chat_only :
         {"add_generation_prompt", "continue_final_message", "tools", "chat_template_kwargs", "documents"})
      if (j.contains(chat_only) && !j[chat_only].is_null())
        return Refused(absl::StrCat("'", chat_only, "' goes with 'messages', not 'prompt'"), chat_only);
    if (!prompt->is_string()) return Refused("'prompt' must be a string", "prompt");
    auto enc = ctx.tokenizer()->Encode(
        prompt->get<std::string>(), tok::EncodeOptions{add_special.value_or(true), tok::SpecialText::kLayoutDefault});
    if (!enc.ok()) return Refused(absl::StrCat("'prompt': ", enc.status().message()), "prompt");
    ids = std::move(*enc);
  } else {
    ChatFields f;  // rendered as /v1/chat/completions renders it with tool_choice left unset
    f.messages = &*messages;
    f.prompt_only = true;
    if (auto t = j.find("tools"); t != j.end()) f.tools = &*t;
    if (auto k = j.find("chat_template_kwargs"); k != j.end()) f.chat_template_kwargs = &*k;
    if (auto d = j.find("documents"); d != j.end()) f.documents = &*d;
    f.add_generation_prompt = add_generation;
    f.continue_final_message = cont.value_or(false);
    f.add_special_tokens = add_special.value_or(false);
    ChatRequest request;
    if (!ReadChatRequest(f, ctx, &request, &err)) return Refusal(err);
    auto session = RenderChat(ctx, std::move(request), &err);
    if (!session) return Refusal(err);
    ids = session->prompt.ids;
  }
  json out = {
      {"count", ids.size()}, {"max_model_len", ctx.engine().max_model_len()}, {"tokens", ids}, {"token_strs", nullptr}};
  if (token_strs.value_or(false)) {
    json strs = json::array();
    for (int32_t id : ids) {
      std::string bytes, text;
      ctx.tokenizer()->AppendTokenBytes(id, false, &bytes);
      tok::DecodeUtf8Lossy(bytes, true, &text);
      strs.push_back(std::move(text));
    }
    out["token_strs"] = std::move(strs);
  }
  return {200, std::move(out)};
}

TokenizeReply Detokenize(const std::string& body, const ApiContext& ctx) {
  ojson j;
  if (auto e = ReadBody(body, "/detokenize", {"model", "tokens"}, &j, ctx)) return *e;
  auto t = j.find("tokens");
  if (t == j.end() || !t->is_array()) return Refused("'tokens' must be a list of token ids", "tokens");
  std::vector<int32_t> ids;
  for (const auto& id : *t) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= ctx.tokenizer()->vocab_size())
      return Refused(absl::StrCat("'tokens': ", id.dump(), " is not a token id of this model (0 to ",
                                  ctx.tokenizer()->vocab_size() - 1, ")"),
                     "tokens");
    ids.push_back(id.get<int32_t>());
  }
  auto text = ctx.tokenizer()->Decode(ids, /*skip_special=*/false);
  if (!text.ok()) return Refused(absl::StrCat("'tokens': ", text.status().message()), "tokens");
  return {200, json{{"prompt", *text}}};
}

}  // namespace ls::server
