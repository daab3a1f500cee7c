// Structured-output request fields and their compilation.
#include "server/structured_request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "structured/structural_tag.h"

namespace ls::server {
namespace {

using ojson = nlohmann::ordered_json;
using Kind = structured::OutputConstraint::Kind;

bool Bad(ApiError* error, const std::string& field, const std::string& message) {
  *error = ApiError{400, message, field};
  return false;
}

// A schema given as an object, or as JSON text (vLLM accepts both).
bool SchemaText(const std::string& field, const ojson& v, std::string* out, ApiError* error) {
  if (v.is_object() || v.is_boolean()) {
    *out = v.dump();
    return true;
  }
  if (v.is_string()) {
    const auto parsed = ojson::parse(v.get<std::string>(), nullptr, false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean()))
      return Bad(error, field, absl::StrCat("'", field, "' must be a JSON schema (an object, or its JSON text)"));
    *out = parsed.dump();
    return true;
  }
  return Bad(error, field, absl::StrCat("'", field, "' must be a JSON schema (an object, or its JSON text)"));
}

bool Choices(const std::string& field, const ojson& v, structured::OutputConstraint* out, ApiError* error) {
  if (!v.is_array() || v.empty())
    return Bad(error, field, absl::StrCat("'", field, "' must be a non-empty list of strings"));
  for (const ojson& c : v) {
    if (!c.is_string() || c.get<std::string>().empty())
      return Bad(error, field, absl::StrCat("'", field, "' must be a non-empty list of non-empty strings"));
    out->choices.push_back(c.get<std::string>());
  }
  out->kind = Kind::kChoice;
  return true;
}

bool Text(const std::string& field, const ojson& v, Kind kind, structured::OutputConstraint* out, ApiError* error) {
  if (!v.is_string() || v.get<std::string>().empty())
    return Bad(error, field, absl::StrCat("'", field, "' must be a non-empty string"));
  out->kind = kind;
  out->text = v.get<std::string>();
  return true;
}

}  // namespace

bool ReadStructuralTag(const std::string& field, const ojson& v, structured::OutputConstraint* out, ApiError* error) {
  ojson j = v;
  if (v.is_string()) {
    j = ojson::parse(v.get<std::string>(), nullptr, false);
    if (j.is_discarded()) return Bad(error, field, absl::StrCat("'", field, "' is not valid JSON"));
  }
  if (j.is_object() && j.contains("special"))
    return Bad(error, field, absl::StrCat("'", field, ".special' is not a field of a structural tag"));
  auto tag = structured::StructuralTag::Parse(j);
  if (!tag.ok()) return Bad(error, field, absl::StrCat("'", field, "': ", tag.status().message()));
  out->kind = Kind::kStructuralTag;
  out->text = tag->ToJson().dump();
  return true;
}

bool ReadConstraintField(const std::string& key, const ojson& value, structured::OutputConstraint* out,
                         ApiError* error) {
  if (value.is_null()) return true;
  if (!out->empty())
    return Bad(error, key, absl::StrCat("'", key, "' and another structured-output field were both given; send one"));
  if (key == "response_format") {
    if (!value.is_object() || !value.contains("type") || !value["type"].is_string())
      return Bad(error, key, "'response_format' must be an object with a 'type'");
    const std::string type = value["type"].get<std::string>();
    if (type == "text") return true;
    if (type == "structural_tag") return ReadStructuralTag(key, value, out, error);
    if (type == "json_object") {
      out->kind = Kind::kJsonObject;
      return true;
    }
    if (type != "json_schema")
      return Bad(error, key,
                 absl::StrCat("'response_format.type' '", type,
                              "' is not supported (expected text, json_object, json_schema or structural_tag)"));
    const auto js = value.find("json_schema");
    if (js == value.end() || !js->is_object())
      return Bad(error, key, "'response_format.json_schema' must be an object with a 'schema'");
    const auto schema = js->find("schema");
    if (schema == js->end()) {
      // OpenAI allows the schema to be left out: any JSON object then.
      out->kind = Kind::kJsonObject;
      return true;
    }
    out->kind = Kind::kJsonSchema;
    return SchemaText("response_format.json_schema.schema", *schema, &out->text, error);
  }
  if (key == "structured_outputs") {
    if (!value.is_object()) return Bad(error, key, "'structured_outputs' must be an object");
    int kinds = 0;
    for (const char* k : {"json", "regex", "choice", "grammar", "json_object", "structural_tag"})
      kinds += value.contains(k) && !value[k].is_null() && !(std::string(k) == "json_object" && value[k] == false);
    if (kinds != 1)
      return Bad(error, key,
                 "'structured_outputs' must set exactly one of json, regex, choice, grammar, json_object and "
                 "structural_tag");
    for (auto it = value.begin(); it != value.end(); ++it) {
      const std::string& k = it.key();
      const std::string field = "structured_outputs." + k;
      if (it->is_null()) continue;
      if (k == "json") {
        out->kind = Kind::kJsonSchema;
        if (!SchemaText(field, *it, &out->text, error)) return false;
      } else if (k == "regex") {
        if (!Text(field, *it, Kind::kRegex, out, error)) return false;
      } else if (k == "choice") {
        if (!Choices(field, *it, out, error)) return false;
      } else if (k == "grammar") {
        if (!Text(field, *it, Kind::kGrammar, out, error)) return false;
      } else if (k == "structural_tag") {
        if (!ReadStructuralTag(field, *it, out, error)) return false;
      } else if (k == "json_object") {
        if (!it->is_boolean()) return Bad(error, field, "'structured_outputs.json_object' must be true or false");
        if (it->get<bool>()) out->kind = Kind::kJsonObject;
      } else if (k == "disable_fallback" || k == "disable_additional_properties" || k == "disable_any_whitespace") {
        // Options of other backends' compilers: this one never falls back, takes no undeclared
        // property unless the schema allows it, and bounds whitespace anyway.
      } else {
        return Bad(error, field, absl::StrCat("'", field, "' is not supported"));
      }
    }
    return true;
  }
  if (key == "guided_json") {
    out->kind = Kind::kJsonSchema;
    return SchemaText(key, value, &out->text, error);
  }
  if (key == "guided_regex") return Text(key, value, Kind::kRegex, out, error);
  if (key == "guided_grammar") return Text(key, value, Kind::kGrammar, out, error);
  if (key == "guided_choice") return Choices(key, value, out, error);
  if (key == "structural_tag") return ReadStructuralTag(key, value, out, error);
  return Bad(error, key, absl::StrCat("'", key, "' is not a structured-output field"));
}

namespace {

// A structural tag's markers as the model's vocabulary writes them: the special tokens among the
// strings it matches literally (triggers, begins, ends, ...), or leading one, are named in the
// tag, so that its grammar matches the special token (a marker written out in plain text stays
// text).
structured::OutputConstraint SpelledForTheModel(const structured::OutputConstraint& c,
                                                const tok::Tokenizer* tokenizer) {
  if (c.kind != Kind::kStructuralTag || !tokenizer) return c;
  auto tag = structured::StructuralTag::Parse(ojson::parse(c.text, nullptr, false));
  if (!tag.ok()) return c;  // compiling says what is wrong
  const std::vector<std::string> markers = tag->Markers();
  constexpr size_t kLongestSpecialToken = 128;  // bytes: a special token's text is short
  for (const std::string& m : markers)
    for (size_t n = 1; n <= std::min(m.size(), kLongestSpecialToken); ++n) {
      const std::string head = m.substr(0, n);
      const int32_t id = tokenizer->TokenToId(head);
      if (id >= 0 && tokenizer->IsSpecial(id) &&
          std::find(tag->special.begin(), tag->special.end(), head) == tag->special.end())
        tag->special.push_back(head);
    }
  structured::OutputConstraint out = c;
  out.text = tag->ToJson().dump();
  return out;
}

}  // namespace

bool ApplyConstraint(const structured::OutputConstraint& request_constraint, const ApiContext& ctx, const char* field,
                     SamplingParams* params, ApiError* error) {
  if (request_constraint.empty()) return true;
  structured::GrammarCache* cache = ctx.grammars();
  if (!cache) return Bad(error, field, "structured output needs the model's tokenizer, and this model has none");
  const structured::OutputConstraint c = SpelledForTheModel(request_constraint, ctx.tokenizer());
  auto grammar = cache->Get(c);
  if (!grammar.ok()) return Bad(error, field, std::string(grammar.status().message()));
  params->grammar = std::move(*grammar);
  return true;
}

bool ApplyReplyConstraint(const ChatSession& chat, const structured::OutputConstraint& request_content,
                          const ApiContext& ctx, const char* field, SamplingParams* params, ApiError* error) {
  const structured::OutputConstraint content = SpelledForTheModel(request_content, ctx.tokenizer());
  auto reply = chat.format->ReplyGrammar(chat.request.inputs, chat.request.render, chat.prompt, content,
                                         chat.request.parallel_tool_calls);
  if (!reply) return true;
  const char* at = content.empty() ? "tools" : field;
  structured::GrammarCache* cache = ctx.grammars();
  if (!cache) return Bad(error, at, "structured output needs the model's tokenizer, and this model has none");
  auto grammar = cache->Get(reply->key, "reply", reply->build);
  if (!grammar.ok()) return Bad(error, at, std::string(grammar.status().message()));
  // The prefill (a continued final message, a forced call's opening) is already the reply's.
  int32_t state = (*grammar)->Initial();
  if (!chat.prompt.prefill.empty()) {
    auto ids = ctx.tokenizer()->Encode(chat.prompt.prefill, tok::EncodeOptions{false, tok::SpecialText::kMatch});
    if (!ids.ok()) return Bad(error, "messages", std::string(ids.status().message()));
    for (int32_t id : *ids) {
      state = (*grammar)->NextToken(state, id);
      if (state < 0)
        return Bad(error, at, absl::StrCat("the final message, which the reply continues, does not fit the '", at,
                                           "' constraint"));
    }
  }
  params->grammar = std::move(*grammar);
  params->grammar_state = state;
  return true;
}

}  // namespace ls::server
