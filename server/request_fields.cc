// The request field table and its readers.
#include "server/request_fields.h"

#include <array>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/structured_request.h"

namespace ls::server {
namespace {

using ojson = nlohmann::ordered_json;

// Reads one field's value; a wrong type or range fails naming the field.
class FieldReader {
 public:
  FieldReader(const char* name, ApiError* err) : name_(name), err_(err) {}
  bool ok() const { return ok_; }
  const char* name() const { return name_; }
  void Fail(const std::string& msg) { Fail(ApiError{400, msg, name_}); }
  void Fail(ApiError e) {
    if (ok_) *err_ = std::move(e);
    ok_ = false;
  }
  void Number(const ojson& v, float* out) {
    if (!v.is_number()) return Fail(absl::StrCat("'", name_, "' must be a number"));
    const double d = v.get<double>();
    if (!std::isfinite(d)) return Fail(absl::StrCat("'", name_, "' must be finite"));
    *out = static_cast<float>(d);
  }
  template <typename T>
  void Int(const ojson& v, T* out, int64_t lo, int64_t hi) {
    if (!v.is_number_integer()) return Fail(absl::StrCat("'", name_, "' must be an integer"));
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) return Fail(absl::StrCat("'", name_, "' must be between ", lo, " and ", hi, ", got ", x));
    *out = static_cast<T>(x);
  }
  template <typename T>
  void Int(const ojson& v, std::optional<T>* out, int64_t lo, int64_t hi) {
    T x{};
    Int(v, &x, lo, hi);
    if (ok_) *out = x;
  }
  void Bool(const ojson& v, bool* out) {
    if (!v.is_boolean()) return Fail(absl::StrCat("'", name_, "' must be true or false"));
    *out = v.get<bool>();
  }
  void String(const ojson& v) {
    if (!v.is_string()) Fail(absl::StrCat("'", name_, "' must be a string"));
  }

 private:
  const char* name_;
  ApiError* err_;
  bool ok_ = true;
};

using Reader = void (*)(FieldReader& f, const ojson& v, RequestDraft& d);

enum class FieldUse { kHonoured, kIgnored, kRefused };

constexpr unsigned kC = 1, kH = 2, kBoth = kC | kH;  // completions, chat

struct Row {
  const char* name;
  unsigned endpoints;
  FieldUse use;
  Reader read = nullptr;                 // honoured
  const char* note = "";                 // ignored: why that is harmless; refused: what the field asks for
  std::array<const char*, 2> neutral{};  // refused: values (as JSON) that ask for nothing
};

Row Honoured(const char* name, unsigned endpoints, Reader read) { return {name, endpoints, FieldUse::kHonoured, read}; }
Row Ignored(const char* name, unsigned endpoints, const char* why) {
  return {name, endpoints, FieldUse::kIgnored, nullptr, why};
}
Row Refused(const char* name, unsigned endpoints, const char* what, std::array<const char*, 2> neutral = {}) {
  return {name, endpoints, FieldUse::kRefused, nullptr, what, neutral};
}

void ReadStop(FieldReader& f, const ojson& v, RequestDraft& d) {
  auto& out = d.params.stop;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    for (const auto& s : v) {
      if (!s.is_string()) return f.Fail("'stop' must be a string or a list of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    return f.Fail("'stop' must be a string or a list of strings");
  }
  for (const auto& s : out)
    if (s.empty()) return f.Fail("'stop' strings must not be empty");
}

void ReadIdList(FieldReader& f, const ojson& v, std::vector<int32_t>* out) {
  const std::string msg = absl::StrCat("'", f.name(), "' must be a list of integers");
  if (!v.is_array()) return f.Fail(msg);
  for (const auto& id : v) {
    if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN || id.get<int64_t>() > INT32_MAX) return f.Fail(msg);
    out->push_back(id.get<int32_t>());
  }
}

// {"token id": bias, ...}; ids and ranges are checked with the other sampling parameters.
void ReadLogitBias(FieldReader& f, const ojson& v, RequestDraft& d) {
  if (!v.is_object()) return f.Fail("'logit_bias' must be an object mapping token ids to biases");
  for (const auto& [key, bias] : v.items()) {
    int32_t id;
    if (!absl::SimpleAtoi(key, &id)) return f.Fail(absl::StrCat("'logit_bias': '", key, "' is not a token id"));
    if (!bias.is_number()) return f.Fail(absl::StrCat("'logit_bias': the bias of token ", key, " must be a number"));
    d.params.logit_bias.emplace_back(id, static_cast<float>(bias.get<double>()));
  }
}

// One of the structured-output fields (server/structured_request.h): at most one per request.
void ReadConstraint(FieldReader& f, const ojson& v, RequestDraft& d) {
  ApiError e;
  if (!ReadConstraintField(f.name(), v, &d.constraint, &e)) return f.Fail(std::move(e));
  if (!d.constraint.empty() && d.constraint_field.empty()) d.constraint_field = f.name();
}

// include_usage (OpenAI's), continuous_usage_stats (vLLM's: with include_usage, every chunk
// carries its choice's usage so far), include_obfuscation (OpenAI's padding of chunks against
// length side channels between a provider and its clients; nothing here pads, so it is accepted
// and has no effect).
void ReadStreamOptions(FieldReader& f, const ojson& v, RequestDraft& d) {
  if (!v.is_object()) return f.Fail("'stream_options' must be an object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    bool* out = k == "include_usage" ? &d.include_usage : k == "continuous_usage_stats" ? &d.continuous_usage : nullptr;
    if (!out && k != "include_obfuscation")
      return f.Fail(absl::StrCat("'stream_options.", k,
                                 "' is not a stream option (include_usage, continuous_usage_stats, "
                                 "include_obfuscation)"));
    if (it->is_null()) continue;
    if (!it->is_boolean()) return f.Fail(absl::StrCat("'stream_options.", k, "' must be true or false"));
    if (out) *out = it->get<bool>();
  }
}

constexpr int64_t kBig = int64_t{1} << 30;
constexpr const char* kFunctions = "the deprecated function calling (use tools and tool_choice)";

// Every field of either endpoint's OpenAI and vLLM request schema, and a few more.
const std::vector<Row>& Table() {
  static const std::vector<Row> rows = {
      Honoured("model", kBoth, [](FieldReader& f, const ojson& v, RequestDraft&) { f.String(v); }),
      Honoured("prompt", kC, [](FieldReader&, const ojson& v, RequestDraft& d) { d.prompt = &v; }),
      Honoured("messages", kH, [](FieldReader&, const ojson& v, RequestDraft& d) { d.chat.messages = &v; }),
      Honoured("temperature", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) {
                 f.Number(v, &d.params.temperature);
                 d.given.temperature = true;
               }),
      Honoured("top_p", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) {
                 f.Number(v, &d.params.top_p);
                 d.given.top_p = true;
               }),
      Honoured("top_k", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) {
                 f.Int(v, &d.params.top_k, -1, kBig);
                 d.given.top_k = true;
               }),
      Honoured("min_p", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) {
                 f.Number(v, &d.params.min_p);
                 d.given.min_p = true;
               }),
      Honoured("repetition_penalty", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) {
                 f.Number(v, &d.params.repetition_penalty);
                 d.given.repetition_penalty = true;
               }),
      Honoured("presence_penalty", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Number(v, &d.params.presence_penalty); }),
      Honoured("frequency_penalty", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Number(v, &d.params.frequency_penalty); }),
      Honoured("max_tokens", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Int(v, &d.max_tokens, 0, kBig); }),
      // After max_tokens: it wins when both are sent.
      Honoured("max_completion_tokens", kH,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Int(v, &d.max_tokens, 1, kBig); }),
      Honoured("min_tokens", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Int(v, &d.params.min_tokens, 0, kBig); }),
      Honoured("n", kBoth, [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Int(v, &d.n, 1, kMaxChoices); }),
      Honoured("priority", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Int(v, &d.priority, -1000000, 1000000); }),
      Honoured("stream", kBoth, [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Bool(v, &d.stream); }),
      Honoured("stream_options", kBoth, ReadStreamOptions),
      Honoured("ignore_eos", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Bool(v, &d.params.ignore_eos); }),
      Honoured(
          "include_stop_str_in_output", kBoth,
          [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Bool(v, &d.params.include_stop_str_in_output); }),
      Honoured("skip_special_tokens", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Bool(v, &d.params.skip_special_tokens); }),
      Honoured("seed", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) {
                 if (!v.is_number_integer()) return f.Fail("'seed' must be an integer");
                 d.params.seed = static_cast<uint64_t>(v.get<int64_t>());
               }),
      Honoured("stop", kBoth, ReadStop),
      Honoured("stop_token_ids", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { ReadIdList(f, v, &d.params.stop_token_ids); }),
      Honoured("logprobs", kC, [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Int(v, &d.logprobs, 0, 20); }),
      Honoured("logprobs", kH, [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Bool(v, &d.chat_logprobs); }),
      Honoured("top_logprobs", kH,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Int(v, &d.top_logprobs, 0, 20); }),
      Honoured("echo", kC, [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Bool(v, &d.echo); }),
      Honoured("prompt_logprobs", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Int(v, &d.prompt_logprobs, 0, 20); }),
      Honoured("logit_bias", kBoth, ReadLogitBias),
      Honoured("cache_salt", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) {
                 if (!v.is_string() || v.get<std::string>().empty())
                   return f.Fail("'cache_salt' must be a non-empty string");
                 d.cache_salt = CacheSaltHash(v.get<std::string>());
               }),
      Honoured("bad_words", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) {
                 if (!v.is_array()) return f.Fail("'bad_words' must be a list of strings");
                 for (const ojson& w : v) {
                   if (!w.is_string() || w.get<std::string>().empty())
                     return f.Fail("'bad_words' must be a list of non-empty strings");
                   d.bad_words.push_back(w.get<std::string>());
                 }
               }),
      Honoured("allowed_token_ids", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) {
                 if (!v.is_array() || v.empty())
                   return f.Fail("'allowed_token_ids' must be a non-empty list of token ids");
                 for (const ojson& id : v) {
                   if (!id.is_number_integer())
                     return f.Fail("'allowed_token_ids' must be a non-empty list of token ids");
                   const int64_t x = id.get<int64_t>();
                   if (x < 0 || x > INT32_MAX)
                     return f.Fail(absl::StrCat("'allowed_token_ids': ", x, " is not a token id"));
                   d.params.allowed_token_ids.push_back(static_cast<int32_t>(x));
                 }
               }),
      Honoured("add_generation_prompt", kH,
               [](FieldReader& f, const ojson& v, RequestDraft& d) {
                 bool b = true;
                 f.Bool(v, &b);
                 d.chat.add_generation_prompt = b;
               }),
      Honoured("continue_final_message", kH,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Bool(v, &d.chat.continue_final_message); }),
      Honoured("tools", kH, [](FieldReader&, const ojson& v, RequestDraft& d) { d.chat.tools = &v; }),
      Honoured("tool_choice", kH, [](FieldReader&, const ojson& v, RequestDraft& d) { d.chat.tool_choice = &v; }),
      Honoured("parallel_tool_calls", kH,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Bool(v, &d.chat.parallel_tool_calls); }),
      Honoured("chat_template_kwargs", kH,
               [](FieldReader&, const ojson& v, RequestDraft& d) { d.chat.chat_template_kwargs = &v; }),
      Honoured("documents", kH, [](FieldReader&, const ojson& v, RequestDraft& d) { d.chat.documents = &v; }),
      // The chat template's `reasoning_effort` variable, as vLLM passes it (chat_template_kwargs
      // may set it instead, and win); templates that do not read it ignore it.
      Honoured("reasoning_effort", kH,
               [](FieldReader& f, const ojson& v, RequestDraft& d) {
                 f.String(v);
                 d.chat.reasoning_effort = &v;
               }),
      Honoured("include_reasoning", kH,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Bool(v, &d.chat.include_reasoning); }),
      Honoured("truncate_prompt_tokens", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Int(v, &d.truncate_prompt_tokens, 1, kBig); }),
      Honoured("return_tokens_as_token_ids", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) { f.Bool(v, &d.tokens_as_ids); }),
      // Whether the prompt goes through the tokenizer's post-processor (Llama-3's BOS): by default
      // for a completion prompt, not for a rendered chat (its template wrote BOS), as in vLLM.
      Honoured("add_special_tokens", kBoth,
               [](FieldReader& f, const ojson& v, RequestDraft& d) {
                 bool b = false;
                 f.Bool(v, &b);
                 d.add_special_tokens = b;
               }),
      Honoured("response_format", kBoth, ReadConstraint),
      Honoured("structured_outputs", kBoth, ReadConstraint),
      Honoured("guided_json", kBoth, ReadConstraint),
      Honoured("guided_regex", kBoth, ReadConstraint),
      Honoured("guided_choice", kBoth, ReadConstraint),
      Honoured("guided_grammar", kBoth, ReadConstraint),
      Honoured("structural_tag", kBoth, ReadConstraint),

      Ignored("user", kBoth, "an end-user id for a provider's abuse monitoring; nothing here uses it"),
      Ignored("metadata", kBoth, "tags for stored completions; nothing is stored"),
      Ignored("store", kBoth, "asks a provider to keep the completion; nothing is stored"),
      Ignored("service_tier", kBoth, "a provider's billing tier; there is one tier"),
      Ignored("safety_identifier", kBoth, "an end-user id for a provider's abuse monitoring; nothing here uses it"),
      Ignored("prompt_cache_key", kBoth,
              "a routing hint for a provider's prompt cache; the prefix cache finds shared prefixes itself"),
      Ignored("prompt_cache_retention", kBoth,
              "how long a provider keeps cached prompts; the prefix cache evicts by use"),
      Ignored("prompt_cache_options", kBoth, "a provider's prompt-cache settings; the prefix cache needs none"),
      Ignored("request_id", kBoth, "the response id is the server's own"),
      Ignored("prediction", kH, "predicted output only speeds a provider up; the output is the same without it"),
      Ignored("spaces_between_special_tokens", kBoth,
              "byte-level BPE decoding puts no spaces between special tokens either way (as vLLM's fast tokenizers)"),

      Refused("functions", kH, kFunctions, {"[]"}),
      Refused("function_call", kH, kFunctions, {"\"none\""}),
      Ignored("guided_decoding_backend", kBoth, "one grammar engine serves every structured-output request"),
      Refused("guided_whitespace_pattern", kBoth, "a custom whitespace pattern in JSON output"),
      Refused("suffix", kC, "insertion (text after the completion)", {"\"\""}),
      Refused("best_of", kBoth, "best-of-n sampling", {"1"}),
      Refused("use_beam_search", kBoth, "beam search", {"false"}),
      Refused("length_penalty", kBoth, "beam search", {"1", "1.0"}),
      Refused("prompt_embeds", kC, "prompt embeddings"),
      Refused("logits_processors", kBoth, "custom logits processors", {"[]"}),
      Refused("kv_transfer_params", kBoth, "disaggregated prefill", {"{}"}),
      Refused("vllm_xargs", kBoth, "extension arguments", {"{}"}),
      Refused("mm_processor_kwargs", kBoth, "multimodal input", {"{}"}),
      Refused("echo", kH, "the last message echoed", {"false"}),
      Refused("chat_template", kH, "a request's own chat template (the server's is --chat_template)"),
      Refused("verbosity", kH, "verbosity control"),
      Refused("audio", kH, "audio output"),
      Refused("modalities", kH, "output other than text", {"[\"text\"]"}),
      Refused("web_search_options", kH, "web search"),
      Refused("moderation", kH, "moderation"),
  };
  return rows;
}

const Row* Find(const std::string& name, unsigned endpoint) {
  for (const Row& r : Table())
    if ((r.endpoints & endpoint) && name == r.name) return &r;
  return nullptr;
}

bool IsNeutral(const Row& r, const ojson& v) {
  const std::string s = v.dump();
  for (const char* n : r.neutral)
    if (n && s == n) return true;
  return false;
}

}  // namespace

bool ReadRequestFields(Endpoint endpoint, const ojson& body, RequestDraft* draft, ApiError* error) {
  const unsigned ep = endpoint == Endpoint::kChat ? kH : kC;
  const char* path = endpoint == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
  for (const auto& [key, value] : body.items()) {
    const Row* r = Find(key, ep);
    if (!r) {
      *error = ApiError{400, absl::StrCat("'", key, "' is not a request field of ", path), key};
      return false;
    }
    if (r->use == FieldUse::kRefused && !value.is_null() && !IsNeutral(*r, value)) {
      *error = ApiError{400, absl::StrCat("'", key, "' is not supported yet (it asks for ", r->note, ")"), key};
      return false;
    }
  }
  // Honoured fields in table order (max_completion_tokens after max_tokens).
  for (const Row& r : Table()) {
    if (r.use != FieldUse::kHonoured || !(r.endpoints & ep)) continue;
    auto it = body.find(r.name);
    if (it == body.end() || it->is_null()) continue;
    FieldReader f(r.name, error);
    r.read(f, *it, *draft);
    if (!f.ok()) return false;
  }
  return true;
}

}  // namespace ls::server
