// OpenAI protocol parsing and formatting.
#include "server/openai_protocol.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/structured_request.h"
#include "tokenizer/utf8.h"

namespace ls::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

bool IsValidUtf8(const std::string& s) { return tok::FindInvalidUtf8(s) == std::string::npos; }

ApiError Bad(std::string message, std::string param) { return ApiError{400, std::move(message), std::move(param)}; }

// Tokenizes one completion prompt: text, or a list of token ids.
bool ReadOnePrompt(const ojson& p, bool add_special_tokens, const ApiContext& ctx, std::vector<int32_t>* ids,
                   ApiError* err) {
  if (p.is_string()) {
    if (!ctx.tokenizer()) return *err = Bad("this model has no tokenizer: send the prompt as token ids", "prompt"), false;
    const std::string text = p.get<std::string>();
    if (text.empty()) return *err = Bad("'prompt' must not be empty", "prompt"), false;
    auto enc = ctx.tokenizer()->Encode(text, tok::EncodeOptions{add_special_tokens, tok::SpecialText::kLayoutDefault});
    if (!enc.ok()) return *err = Bad(absl::StrCat("'prompt': ", enc.status().message()), "prompt"), false;
    *ids = std::move(*enc);
    return true;
  }
  if (!p.is_array()) return *err = Bad("'prompt' must be a string or a list of token ids", "prompt"), false;
  if (p.empty()) return *err = Bad("'prompt' must not be empty", "prompt"), false;
  const int64_t V = ctx.engine().model_config().vocab_size;
  for (const auto& t : p) {
    if (!t.is_number_integer())
      return *err = Bad("'prompt' must be a string, a list of token ids, or a list of either", "prompt"), false;
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= V)
      return *err = Bad(absl::StrCat("'prompt': token id ", id, " is outside the vocabulary [0, ", V, ")"), "prompt"),
             false;
    ids->push_back(static_cast<int32_t>(id));
  }
  return true;
}

// Reads the completion prompt: a string, a list of token ids, or a batch: a list of strings or of
// token-id lists (one choice set per prompt).
bool ReadPrompts(const ojson* p, bool add_special_tokens, const ApiContext& ctx,
                 std::vector<std::vector<int32_t>>* out, ApiError* err) {
  if (!p) return *err = Bad("'prompt' is required", "prompt"), false;
  const bool batch = p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array());
  if (!batch) {
    out->emplace_back();
    return ReadOnePrompt(*p, add_special_tokens, ctx, &out->back(), err);
  }
  if (p->size() > static_cast<size_t>(kMaxPrompts))
    return *err = Bad(absl::StrCat("'prompt' holds ", p->size(), " prompts, more than ", kMaxPrompts), "prompt"), false;
  const bool texts = (*p)[0].is_string();
  for (size_t i = 0; i < p->size(); ++i) {
    const ojson& e = (*p)[i];
    if (texts ? !e.is_string() : !e.is_array())
      return *err = Bad("a batched 'prompt' must be a list of strings or a list of token-id lists, not a mix", "prompt"),
             false;
    out->emplace_back();
    if (!ReadOnePrompt(e, add_special_tokens, ctx, &out->back(), err)) {
      if (p->size() > 1) err->message = absl::StrCat("prompt ", i, ": ", err->message);
      return false;
    }
  }
  return true;
}

std::string TokenBytes(const ApiContext& ctx, int32_t id) {
  std::string bytes;
  if (ctx.tokenizer()) ctx.tokenizer()->AppendTokenBytes(id, false, &bytes);
  return bytes;
}

std::string TokenText(const ParsedRequest& r, const ApiContext& ctx, int32_t id) {
  if (r.tokens_as_ids) return absl::StrCat("token_id:", id);
  std::string text;
  tok::DecodeUtf8Lossy(TokenBytes(ctx, id), true, &text);
  return text;
}

json Bytes(const ApiContext& ctx, int32_t id) {
  json b = json::array();
  for (unsigned char c : TokenBytes(ctx, id)) b.push_back(static_cast<int>(c));
  return b;
}

json ChatLogprobsJson(const ParsedRequest& r, const std::vector<TokenLogprob>& lps, const ApiContext& ctx) {
  return {{"content", LogprobContentJson(r, lps, ctx)}};
}

// The completions logprobs object: with echo, the prompt's tokens first (the first has no
// logprob: null), then the generated ones; text_offset counts characters of the choice's text.
json CompletionLogprobsJson(const ParsedRequest& r, const Choice& c, const ApiContext& ctx) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  int64_t offset = c.text_offset;
  auto add = [&](int32_t id, const TokenLogprob* lp) {
    const std::string text = TokenText(r, ctx, id);
    tokens.push_back(text);
    offsets.push_back(offset);
    offset += TextChars(text);
    if (!lp) {
      token_lps.push_back(nullptr);
      tops.push_back(nullptr);
      return;
    }
    token_lps.push_back(lp->logprob);
    json top = json::object();
    // The engine may have found more alternatives for the prompt (prompt_logprobs asked for more).
    const size_t n = std::min(lp->top.size(), static_cast<size_t>(r.params.logprobs.value_or(0)));
    for (size_t k = 0; k < n; ++k) top[TokenText(r, ctx, lp->top[k].first)] = lp->top[k].second;
    tops.push_back(top);
  };
  for (size_t i = 0; i < c.echo_ids.size(); ++i)
    add(c.echo_ids[i], i > 0 && i - 1 < c.echo_logprobs.size() ? &c.echo_logprobs[i - 1] : nullptr);
  for (const auto& lp : c.logprobs) add(lp.token_id, &lp);
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// vLLM's prompt_logprobs: null for the first prompt token, then per token an object keyed by token
// id (as text) holding the token itself and the top alternatives, each with its logprob, its rank
// in the model's distribution (1: the most likely) and its text.
json PromptLogprobsJson(const ParsedRequest& r, const Choice& c, const ApiContext& ctx) {
  json out = json::array();
  auto entry = [&](int32_t id, float logprob, int32_t rank) {
    return json{{"logprob", logprob}, {"rank", rank}, {"decoded_token", TokenText(r, ctx, id)}};
  };
  for (size_t i = 0; i < c.prompt_ids.size(); ++i) {
    if (i == 0 || i - 1 >= c.prompt_logprobs.size()) {
      out.push_back(nullptr);
      continue;
    }
    const TokenLogprob& lp = c.prompt_logprobs[i - 1];
    json at = json::object();
    const size_t n = std::min(lp.top.size(), static_cast<size_t>(r.prompt_logprobs.value_or(0)));
    for (size_t k = 0; k < n; ++k)
      at[std::to_string(lp.top[k].first)] = entry(lp.top[k].first, lp.top[k].second, static_cast<int32_t>(k) + 1);
    at[std::to_string(lp.token_id)] = entry(lp.token_id, lp.logprob, lp.rank);
    out.push_back(std::move(at));
  }
  return out;
}

json LogprobsJson(const ParsedRequest& r, const Choice& c, const ApiContext& ctx) {
  if (!r.params.logprobs) return nullptr;
  return r.endpoint == Endpoint::kChat ? ChatLogprobsJson(r, c.logprobs, ctx) : CompletionLogprobsJson(r, c, ctx);
}

// A chat choice's message: content (null when the choice only called tools), reasoning_content
// when there is reasoning, tool_calls when there are calls.
json ChatMessageJson(const Choice& c) {
  json m = {{"role", "assistant"}};
  m["content"] = c.tool_calls.empty() || !c.text.empty() ? json(c.text) : json(nullptr);
  if (!c.reasoning.empty()) m["reasoning_content"] = c.reasoning;
  if (!c.tool_calls.empty()) {
    json calls = json::array();
    for (const chat::ToolCallDelta& t : c.tool_calls)
      calls.push_back({{"id", t.id}, {"type", "function"}, {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
    m["tool_calls"] = std::move(calls);
  }
  return m;
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
    *error = Bad("request body is not valid UTF-8", "");
    return std::nullopt;
  }
  // Key order is kept: a chat template prints tools and arguments with tojson as they were sent.
  ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *error = Bad("request body is not valid JSON", "");
    return std::nullopt;
  }
  if (!j.is_object()) {
    *error = Bad("request body must be a JSON object", "");
    return std::nullopt;
  }
  RequestDraft d;
  if (!ReadRequestFields(endpoint, j, &d, error)) return std::nullopt;
  if (auto m = j.find("model"); m != j.end() && m->is_string() && m->get<std::string>() != ctx.model_name()) {
    *error = ApiError{404, absl::StrCat("The model '", m->get<std::string>(), "' does not exist; this server serves '",
                                        ctx.model_name(), "'"), "model", "not_found_error"};
    return std::nullopt;
  }
  ParsedRequest r;
  r.endpoint = endpoint;
  r.n = d.n;
  r.priority = d.priority;
  r.cache_salt = d.cache_salt;
  r.stream = d.stream;
  r.include_usage = d.include_usage;
  r.continuous_usage = d.include_usage && d.continuous_usage;
  r.tokens_as_ids = d.tokens_as_ids;
  r.echo = d.echo;
  SamplingParams& p = r.params;
  p = d.params;
  if (endpoint == Endpoint::kChat) {
    if (d.top_logprobs && !d.chat_logprobs) {
      *error = Bad("'top_logprobs' needs 'logprobs': true", "top_logprobs");
      return std::nullopt;
    }
    r.chat_logprobs = d.chat_logprobs;
    if (d.chat_logprobs) p.logprobs = d.top_logprobs.value_or(0);
  } else {
    p.logprobs = d.logprobs;
    if (d.echo && d.logprobs) p.prompt_logprobs = d.logprobs;
  }
  // bad_words as vLLM reads them: each word as written and with one leading space (the form a
  // word takes after another), its tokens a sequence the output never completes.
  for (const std::string& word : d.bad_words) {
    if (!ctx.tokenizer()) {
      *error = Bad("'bad_words' needs the model's tokenizer, which this model has none of", "bad_words");
      return std::nullopt;
    }
    const std::string bare(absl::StripLeadingAsciiWhitespace(word));
    for (const std::string& text : {bare, " " + bare}) {
      auto ids = ctx.tokenizer()->Encode(text, tok::EncodeOptions{false, tok::SpecialText::kAsText});
      if (!ids.ok() || ids->empty()) continue;
      if (std::find(p.bad_words_ids.begin(), p.bad_words_ids.end(), *ids) == p.bad_words_ids.end())
        p.bad_words_ids.push_back(std::move(*ids));
    }
  }
  if (d.prompt_logprobs) {
    if (d.stream) {  // as vLLM: they would all come before the first token
      *error = Bad("'prompt_logprobs' is not available with 'stream': true", "prompt_logprobs");
      return std::nullopt;
    }
    r.prompt_logprobs = d.prompt_logprobs;
    p.prompt_logprobs = std::max(p.prompt_logprobs.value_or(0), *d.prompt_logprobs);
  }
  // max_tokens 0 asks for no generation: allowed with echo (scoring a prompt), where the engine
  // still generates one token that is not returned.
  if (d.max_tokens && *d.max_tokens == 0) {
    if (!d.echo) {
      *error = Bad("'max_tokens' must be at least 1 (0 only with 'echo': true)", "max_tokens");
      return std::nullopt;
    }
    r.generate = false;
    p.min_tokens = 0;
  }

  const std::string prompt_field = endpoint == Endpoint::kChat ? "messages" : "prompt";
  if (endpoint == Endpoint::kChat) {
    d.chat.add_special_tokens = d.add_special_tokens.value_or(false);
    ChatRequest chat;
    if (!ReadChatRequest(d.chat, ctx, &chat, error)) return std::nullopt;
    r.chat = RenderChat(ctx, std::move(chat), error);
    if (!r.chat) return std::nullopt;
    r.prompts.push_back(r.chat->prompt.ids);
    for (int32_t id : r.chat->format->stop_token_ids()) p.stop_token_ids.push_back(id);
  } else if (!ReadPrompts(d.prompt, d.add_special_tokens.value_or(true), ctx, &r.prompts, error)) {
    return std::nullopt;
  }
  ApplyGenerationDefaults(ctx.generation_defaults(), d.given, ctx.engine().model_config().eos_token_ids, &p);
  if (r.chat ? !ApplyReplyConstraint(*r.chat, d.constraint, ctx, d.constraint_field.c_str(), &p, error)
             : !ApplyConstraint(d.constraint, ctx, d.constraint_field.c_str(), &p, error))
    return std::nullopt;
  const int32_t max_len = ctx.engine().max_model_len();
  std::vector<size_t> sent_len;  // each prompt's tokens before truncation
  for (const auto& ids : r.prompts) sent_len.push_back(ids.size());
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    auto& ids = r.prompts[i];
    if (d.truncate_prompt_tokens && static_cast<int64_t>(ids.size()) > *d.truncate_prompt_tokens)
      ids.erase(ids.begin(), ids.end() - *d.truncate_prompt_tokens);
    const std::string which = r.prompts.size() > 1 ? absl::StrCat("prompt ", i, ": ") : "";
    const int32_t prompt_len = static_cast<int32_t>(ids.size());
    if (auto st = ctx.engine().CheckContextLength(prompt_len, 0); !st.ok()) {
      *error = Bad(absl::StrCat(which, st.message()), prompt_field);
      return std::nullopt;
    }
    const int64_t max_tokens = !r.generate   ? 1
                               : d.max_tokens ? *d.max_tokens
                                              : DefaultMaxTokens(ctx.generation_defaults(), endpoint == Endpoint::kChat,
                                                                 prompt_len, max_len);
    if (auto st = ctx.engine().CheckContextLength(prompt_len, max_tokens); !st.ok()) {
      *error = Bad(absl::StrCat(which, st.message()), "max_tokens");
      return std::nullopt;
    }
    // Every prompt gets the same max_tokens; the chat default is the smallest room left.
    p.max_tokens = i == 0 ? static_cast<int32_t>(max_tokens) : std::min(p.max_tokens, static_cast<int32_t>(max_tokens));
    if (r.echo) {  // the prompt as sent when it was text and is whole, else its tokens decoded
      const ojson& sent = r.prompts.size() > 1 ? (*d.prompt)[i] : *d.prompt;
      std::string text, bytes;
      if (sent.is_string() && static_cast<size_t>(prompt_len) == sent_len[i]) {
        text = sent.get<std::string>();
      } else {
        for (int32_t id : ids) bytes += TokenBytes(ctx, id);
        tok::DecodeUtf8Lossy(bytes, true, &text);
      }
      r.prompt_texts.push_back(std::move(text));
    }
  }
  if (auto st = p.Validate(ctx.engine().model_config().vocab_size); !st.ok()) {
    // Messages start with the field they are about ("stop_token_ids: id 7 ...", "top_p must ...").
    std::string msg(st.message());
    *error = Bad(msg, msg.substr(0, msg.find_first_not_of("abcdefghijklmnopqrstuvwxyz_")));
    return std::nullopt;
  }
  return r;
}

int64_t TextChars(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

void AppendDelta(Choice* c, Choice delta) {
  // The message's tokens: those of every delta before the first call that adds no reasoning and no
  // call (text, or nothing yet: part of a character, the end of the sequence).
  if (delta.reasoning.empty() && delta.tool_calls.empty() && c->tool_calls.empty())
    c->text_logprobs.insert(c->text_logprobs.end(), delta.logprobs.begin(), delta.logprobs.end());
  c->token_ids.insert(c->token_ids.end(), delta.token_ids.begin(), delta.token_ids.end());
  c->text += delta.text;
  c->reasoning += delta.reasoning;
  chat::ChatDelta calls;
  calls.tool_calls = std::move(c->tool_calls);
  calls.Append({"", "", std::move(delta.tool_calls)});
  c->tool_calls = std::move(calls.tool_calls);
  c->tool_calls_made = c->tool_calls_made || delta.tool_calls_made;
  for (auto& lp : delta.logprobs) c->logprobs.push_back(std::move(lp));
  if (!delta.echo_ids.empty()) {
    c->echo_ids = std::move(delta.echo_ids);
    c->echo_logprobs = std::move(delta.echo_logprobs);
  }
  if (!delta.prompt_ids.empty()) {
    c->prompt_ids = std::move(delta.prompt_ids);
    c->prompt_logprobs = std::move(delta.prompt_logprobs);
  }
}

Choice OutputToDelta(const ParsedRequest& r, int32_t index, RequestOutput& o, bool first) {
  Choice c;
  if (r.generate) {
    c.token_ids = std::move(o.token_ids);
    c.text = std::move(o.text);
    c.logprobs = std::move(o.logprobs);
  }
  if (first && r.prompt_logprobs) {
    c.prompt_ids = r.prompts[index / r.n];
    c.prompt_logprobs = r.echo ? o.prompt_logprobs : std::move(o.prompt_logprobs);
  }
  if (first && r.echo) {
    const int32_t prompt = index / r.n;
    c.text = r.prompt_texts[prompt] + c.text;
    c.echo_ids = r.prompts[prompt];
    c.echo_logprobs = std::move(o.prompt_logprobs);
  }
  c.finish = o.finish_reason;
  if (!r.generate && (c.finish == FinishReason::kStop || c.finish == FinishReason::kLength)) c.finish = FinishReason::kLength;
  return c;
}

json ErrorBody(const ApiError& e) {
  return {{"error", {{"message", e.message}, {"type", e.type}, {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                     {"code", e.http_status}}}};
}

json FinishReasonJson(FinishReason f, bool tool_calls_made) {
  switch (f) {
    case FinishReason::kStop: return tool_calls_made ? "tool_calls" : "stop";
    case FinishReason::kLength: return tool_calls_made ? "tool_calls" : "length";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: return nullptr;
  }
  return nullptr;
}

json LogprobContentJson(const ParsedRequest& r, const std::vector<TokenLogprob>& lps, const ApiContext& ctx) {
  json content = json::array();
  for (const auto& lp : lps) {
    json top = json::array();
    for (auto [id, l] : lp.top)
      top.push_back({{"token", TokenText(r, ctx, id)}, {"logprob", l}, {"bytes", Bytes(ctx, id)}});
    content.push_back({{"token", TokenText(r, ctx, lp.token_id)},
                       {"logprob", lp.logprob},
                       {"bytes", Bytes(ctx, lp.token_id)},
                       {"top_logprobs", top}});
  }
  return content;
}

json CompletionBody(const ParsedRequest& r, const std::string& id, int64_t created, const std::string& model,
                    const std::vector<Choice>& choices, const Usage& usage, const ApiContext& ctx) {
  json cs = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    if (r.endpoint == Endpoint::kChat) {
      cs.push_back({{"index", i},
                    {"message", ChatMessageJson(c)},
                    {"logprobs", LogprobsJson(r, c, ctx)},
                    {"finish_reason", FinishReasonJson(c.finish, c.tool_calls_made)}});
    } else {
      cs.push_back({{"index", i}, {"text", c.text}, {"logprobs", LogprobsJson(r, c, ctx)},
                    {"finish_reason", FinishReasonJson(c.finish)}});
      if (r.prompt_logprobs) cs.back()["prompt_logprobs"] = PromptLogprobsJson(r, c, ctx);
    }
  }
  json body = {{"id", id},           {"object", r.endpoint == Endpoint::kChat ? "chat.completion" : "text_completion"},
               {"created", created}, {"model", model},
               {"choices", cs},      {"usage", UsageJson(usage)}};
  // Chat, as vLLM: one prompt for every choice, its logprobs beside them.
  if (r.prompt_logprobs && r.endpoint == Endpoint::kChat && !choices.empty())
    body["prompt_logprobs"] = PromptLogprobsJson(r, choices[0], ctx);
  return body;
}

json ChunkUsage(const ParsedRequest& r, int32_t index, int32_t completion_tokens) {
  const int32_t prompt = static_cast<int32_t>(r.prompts[index / r.n].size());
  const int32_t completion = r.generate ? completion_tokens : 0;
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

std::vector<json> StreamChunks(const ParsedRequest& r, const std::string& id, int64_t created,
                               const std::string& model, int32_t index, const Choice& delta, bool first,
                               const ApiContext& ctx) {
  auto chunk = [&](json choice) {
    return json{{"id", id},
                {"object", r.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", json::array({std::move(choice)})}};
  };
  if (r.endpoint != Endpoint::kChat)
    return {chunk({{"index", index}, {"text", delta.text}, {"logprobs", LogprobsJson(r, delta, ctx)},
                   {"finish_reason", FinishReasonJson(delta.finish)}})};
  // The delta's parts in the order they were written: reasoning and content, then each call's
  // head (id, type, name) and its arguments. The finish reason goes on the last.
  std::vector<json> deltas;
  json text = json::object();
  if (first) text["role"] = "assistant";
  if (!delta.reasoning.empty()) text["reasoning_content"] = delta.reasoning;
  if (!delta.text.empty() || (first && delta.finish == FinishReason::kNone && delta.tool_calls.empty()))
    text["content"] = delta.text;
  if (!text.empty() || !delta.logprobs.empty()) deltas.push_back(std::move(text));
  for (const chat::ToolCallDelta& t : delta.tool_calls) {
    if (!t.id.empty() || !t.name.empty()) {
      deltas.push_back({{"tool_calls", json::array({{{"index", t.index}, {"id", t.id}, {"type", "function"},
                                                      {"function", {{"name", t.name}, {"arguments", ""}}}}})}});
    }
    if (!t.arguments.empty())
      deltas.push_back(
          {{"tool_calls", json::array({{{"index", t.index}, {"function", {{"arguments", t.arguments}}}}})}});
  }
  if (deltas.empty() && delta.finish != FinishReason::kNone) deltas.push_back(json::object());
  std::vector<json> out;
  for (size_t k = 0; k < deltas.size(); ++k) {
    const bool last = k + 1 == deltas.size();
    out.push_back(chunk({{"index", index},
                         {"delta", std::move(deltas[k])},
                         {"logprobs", k == 0 ? LogprobsJson(r, delta, ctx) : json(nullptr)},
                         {"finish_reason", last ? FinishReasonJson(delta.finish, delta.tool_calls_made) : json(nullptr)}}));
  }
  return out;
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
