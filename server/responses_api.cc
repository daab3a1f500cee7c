// Responses API: requests to chat requests, chat replies to Response objects and events.
#include "server/responses_api.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/form_values.h"

namespace ls::server {
namespace {

using ojson = nlohmann::ordered_json;

// A 400 naming `param`; converts to any empty optional.
std::nullopt_t RequestError(ApiError* error, const std::string& param, std::string message) {
  *error = ApiError{400, std::move(message), param};
  return std::nullopt;
}

// A request object's string field as text: `absent` where the object or the field is missing, the
// field's JSON where it holds another type (so that it matches no name and an error can show it).
// (nlohmann's value() throws on a field of another type.)
std::string TextField(const ojson& j, const char* k, const std::string& absent = "") {
  if (!j.is_object()) return absent;
  const auto it = j.find(k);
  if (it == j.end()) return absent;
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// An optional boolean field: *value is nullopt when it is absent or null; false with *error when
// it is anything but a boolean.
bool OptionalBool(const ojson& j, const char* k, std::optional<bool>* value, ApiError* error) {
  value->reset();
  if (!j.contains(k) || j[k].is_null()) return true;
  if (!j[k].is_boolean()) {
    RequestError(error, k, absl::StrCat("'", k, "' must be true or false"));
    return false;
  }
  *value = j[k].get<bool>();
  return true;
}

// The text of a content field: a string, or text parts (input_text, output_text, text); any other
// part is refused naming it.
bool ContentText(const ojson& content, const std::string& where, std::string* out, ApiError* error) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return true;
  }
  if (!content.is_array()) {
    *error = ApiError{400, absl::StrCat("'", where, "' must be a string or a list of text parts"), "input"};
    return false;
  }
  for (size_t i = 0; i < content.size(); ++i) {
    const ojson& p = content[i];
    const std::string type = TextField(p, "type");
    if ((type == "input_text" || type == "output_text" || type == "text") && p.contains("text") && p["text"].is_string()) {
      if (!out->empty()) *out += "\n";
      *out += p["text"].get<std::string>();
      continue;
    }
    *error = ApiError{400,
                      absl::StrCat("'", where, "[", i, "]' is a '", type.empty() ? "malformed" : type,
                                   "' part; this server reads text parts only"),
                      "input"};
    return false;
  }
  return true;
}

// input (a string, or items) to chat messages.
bool Messages(const ojson& input, ojson* messages, ApiError* error) {
  if (input.is_string()) {
    messages->push_back({{"role", "user"}, {"content", input}});
    return true;
  }
  if (!input.is_array() || input.empty()) {
    *error = ApiError{400, "'input' must be a string or a non-empty list of items", "input"};
    return false;
  }
  std::string reasoning;  // a reasoning item's text, given to the assistant message after it
  auto assistant = [&]() -> ojson& {
    if (messages->empty() || (*messages)[messages->size() - 1]["role"] != "assistant")
      messages->push_back({{"role", "assistant"}, {"content", ""}});
    ojson& m = (*messages)[messages->size() - 1];
    if (!reasoning.empty()) {
      m["reasoning_content"] = reasoning;
      reasoning.clear();
    }
    return m;
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const ojson& item = input[i];
    const std::string where = absl::StrCat("input[", i, "]");
    if (!item.is_object()) {
      *error = ApiError{400, absl::StrCat("'", where, "' must be an object"), "input"};
      return false;
    }
    const std::string type = TextField(item, "type", item.contains("role") ? "message" : "");
    if (type == "message") {
      const std::string role = TextField(item, "role");
      if (role != "user" && role != "system" && role != "developer" && role != "assistant") {
        *error = ApiError{400, absl::StrCat("'", where, ".role' must be user, system, developer or assistant"), "input"};
        return false;
      }
      std::string text;
      if (!ContentText(item.contains("content") ? item["content"] : ojson(""), where + ".content", &text, error))
        return false;
      if (role == "assistant") {
        ojson& m = assistant();
        m["content"] = m["content"].get<std::string>() + text;
      } else {
        messages->push_back({{"role", role == "developer" ? "system" : role}, {"content", text}});
      }
    } else if (type == "function_call") {
      for (const char* k : {"call_id", "name", "arguments"})
        if (!item.contains(k) || !item[k].is_string()) {
          *error = ApiError{400, absl::StrCat("'", where, ".", k, "' must be a string"), "input"};
          return false;
        }
      ojson& m = assistant();
      if (!m.contains("tool_calls")) m["tool_calls"] = ojson::array();
      m["tool_calls"].push_back({{"id", item["call_id"]},
                                 {"type", "function"},
                                 {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
    } else if (type == "function_call_output") {
      if (!item.contains("call_id") || !item["call_id"].is_string()) {
        *error = ApiError{400, absl::StrCat("'", where, ".call_id' must be a string"), "input"};
        return false;
      }
      std::string text;
      if (!ContentText(item.contains("output") ? item["output"] : ojson(""), where + ".output", &text, error))
        return false;
      messages->push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", text}});
    } else if (type == "reasoning") {
      // Its text (content, else summary) becomes the next assistant message's reasoning_content.
      for (const char* k : {"content", "summary"}) {
        if (!item.contains(k) || !item[k].is_array() || item[k].empty()) continue;
        for (const ojson& p : item[k])
          if (p.is_object() && p.contains("text") && p["text"].is_string()) reasoning += p["text"].get<std::string>();
        break;
      }
    } else {
      *error = ApiError{400,
                        absl::StrCat("'", where, "' is a '", type.empty() ? "untyped" : type,
                                     "' item; supported: message, function_call, function_call_output, reasoning"),
                        "input"};
      return false;
    }
  }
  return true;
}

// input (read by Messages already) as Responses items: a string is one user message, a message's
// string content one text part, a role-only item a message.
ojson InputItems(const ojson& input) {
  if (input.is_string())
    return ojson::array({{{"type", "message"},
                          {"role", "user"},
                          {"content", ojson::array({{{"type", "input_text"}, {"text", input}}})}}});
  ojson items = ojson::array();
  for (const ojson& given : input) {
    ojson item = given;
    if (!item.contains("type")) item["type"] = "message";
    if (item["type"] == "message" && item.contains("content") && item["content"].is_string())
      item["content"] = ojson::array({{{"type", TextField(item, "role") == "assistant" ? "output_text" : "input_text"},
                                       {"text", item["content"]}}});
    items.push_back(std::move(item));
  }
  return items;
}

ojson ResponsesUsageJson(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}, {"cache_write_tokens", 0}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

ojson ReasoningItem(const std::string& id, const std::string& text, const char* status) {
  return {{"type", "reasoning"},
          {"id", id},
          {"summary", ojson::array()},
          {"content", text.empty() ? ojson::array() : ojson::array({{{"type", "reasoning_text"}, {"text", text}}})},
          {"status", status}};
}

ojson TextPart(const std::string& text, const ojson& logprobs) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", ojson::array()}, {"logprobs", logprobs}};
}

ojson MessageItem(const std::string& id, const std::string& text, const char* status,
                  const ojson& logprobs = ojson::array()) {
  return {{"type", "message"},
          {"id", id},
          {"status", status},
          {"role", "assistant"},
          {"content", text.empty() && std::string(status) == "in_progress" ? ojson::array()
                                                                           : ojson::array({TextPart(text, logprobs)})}};
}

ojson CallItem(const std::string& id, const chat::ToolCallDelta& call, const std::string& arguments, const char* status) {
  return {{"type", "function_call"}, {"id", id},           {"call_id", call.id},
          {"name", call.name},       {"arguments", arguments}, {"status", status}};
}

// The Response object around `output`.
ojson Response(const ResponsesRequest& req, const std::string& id, int64_t created, const std::string& model,
               ojson output, const char* status, const std::optional<Usage>& usage, bool incomplete) {
  ojson r = {{"id", id}, {"object", "response"}, {"created_at", created}, {"status", status}, {"model", model}};
  if (incomplete && !output.empty()) output[output.size() - 1]["status"] = "incomplete";  // the item cut short
  r["output"] = std::move(output);
  r["error"] = nullptr;
  r["incomplete_details"] = incomplete ? ojson{{"reason", "max_output_tokens"}} : ojson(nullptr);
  for (auto it = req.echo.begin(); it != req.echo.end(); ++it) r[it.key()] = it.value();
  r["usage"] = usage ? ResponsesUsageJson(*usage) : ojson(nullptr);
  return r;
}

}  // namespace

std::optional<ResponsesRequest> ReadResponsesRequest(const std::string& body, ResponseStore* store, ApiError* error) {
  const ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return RequestError(error, "", "request body is not valid JSON");
  if (!j.is_object()) return RequestError(error, "", "request body must be a JSON object");
  ResponsesRequest out;
  ojson chat = {{"messages", ojson::array()}};
  ojson echo = {{"instructions", nullptr}, {"max_output_tokens", nullptr}, {"parallel_tool_calls", true},
                {"previous_response_id", nullptr}, {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
                {"store", false}, {"temperature", nullptr}, {"text", {{"format", {{"type", "text"}}}}},
                {"tool_choice", "auto"}, {"tools", ojson::array()}, {"top_p", nullptr}, {"truncation", "disabled"},
                {"metadata", ojson::object()}, {"background", false}};
  const auto null_or = [&](const char* k, const ojson& neutral) {
    return !j.contains(k) || j[k].is_null() || j[k] == neutral;
  };
  // Asking for state or hosted features this server does not keep or have: refused by name.
  const std::vector<std::pair<const char*, const char*>> refused = {
      {"conversation", "a stored conversation (send the conversation as input)"},
      {"prompt", "a stored prompt template"},
      {"context_management", "server-side context management"}};
  for (const auto& [k, what] : refused)
    if (!null_or(k, ojson()))
      return RequestError(error, k, absl::StrCat("'", k, "' is not supported yet (it asks for ", what, ")"));
  // store: true is the API's default; a server without a store (--responses_store_mb 0) keeps
  // nothing unless asked, and refuses being asked.
  std::optional<bool> store_field, background_field;
  if (!OptionalBool(j, "store", &store_field, error) || !OptionalBool(j, "background", &background_field, error))
    return std::nullopt;
  if (store_field == true && !store->enabled())
    return RequestError(
        error, "store",
        "'store' is true but this server keeps no responses (--responses_store_mb 0); send store: false");
  out.store = store->enabled() && store_field.value_or(true);
  echo["store"] = out.store;
  ojson previous = ojson::array();  // the stored conversation that previous_response_id continues
  if (j.contains("previous_response_id") && !j["previous_response_id"].is_null()) {
    const ojson& v = j["previous_response_id"];
    if (!v.is_string()) return RequestError(error, "previous_response_id", "'previous_response_id' must be a string");
    const std::string id = v.get<std::string>();
    if (!store->enabled())
      return RequestError(error, "previous_response_id",
                          "'previous_response_id' needs stored responses, and this server keeps none "
                          "(--responses_store_mb 0): send the conversation as input");
    std::optional<ResponseStore::Entry> entry = store->Get(id);
    if (!entry) {
      *error = ApiError{
          404,
          absl::StrCat("previous response '", id, "' is not stored here (never stored, deleted, or dropped for room)"),
          "previous_response_id", "not_found_error"};
      return std::nullopt;
    }
    const ojson response = ojson::parse(entry->response);
    if (StillRunning(response))
      return RequestError(
          error, "previous_response_id",
          absl::StrCat("previous response '", id, "' has not finished (status ", response.value("status", ""),
                       "): wait until GET /v1/responses/", id, " shows it done"));
    previous = ojson::parse(entry->conversation);
    echo["previous_response_id"] = id;
  }
  out.background = background_field.value_or(false);
  if (out.background && !out.store)
    return RequestError(error, "background",
                        store->enabled() ? "'background' needs the response stored: leave 'store' true"
                                         : "'background' needs stored responses, and this server keeps none "
                                           "(--responses_store_mb 0)");
  echo["background"] = out.background;
  if (!null_or("truncation", "disabled")) {
    if (j["truncation"] != "auto")
      return RequestError(error, "truncation", "'truncation' must be \"auto\" or \"disabled\"");
    out.truncate = true;
    echo["truncation"] = "auto";
  }
  // reasoning.effort is the chat request's reasoning_effort (the template's variable); the
  // summary asks for nothing the reply does not already carry (reasoning items hold the text).
  if (j.contains("reasoning") && !j["reasoning"].is_null()) {
    const ojson& r = j["reasoning"];
    if (!r.is_object()) return RequestError(error, "reasoning", "'reasoning' must be an object");
    if (r.contains("effort") && !r["effort"].is_null()) {
      if (!r["effort"].is_string())
        return RequestError(error, "reasoning.effort", "'reasoning.effort' must be a string");
      chat["reasoning_effort"] = r["effort"];
      echo["reasoning"]["effort"] = r["effort"];
    }
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const ojson& v = it.value();
    if (k == "model") {
      chat["model"] = v;
    } else if (k == "input") {
      if (!Messages(v, &chat["messages"], error)) return std::nullopt;
      out.input_items = InputItems(v);
    } else if (k == "instructions") {
      if (!v.is_null() && !v.is_string()) return RequestError(error, k, "'instructions' must be a string");
      echo[k] = v;
    } else if (k == "tools") {
      if (!v.is_array()) return RequestError(error, k, "'tools' must be a list");
      ojson tools = ojson::array();
      for (size_t i = 0; i < v.size(); ++i) {
        const ojson& t = v[i];
        const std::string type = TextField(t, "type");
        if (type != "function")
          return RequestError(
              error, k, absl::StrCat("'tools[", i, "]' is a '", type, "' tool; this server serves function tools"));
        if (!t.contains("name") || !t["name"].is_string())
          return RequestError(error, k, absl::StrCat("'tools[", i, "].name' must be a string"));
        ojson f = {{"name", t["name"]}};
        for (const char* field : {"description", "parameters", "strict"})
          if (t.contains(field) && !t[field].is_null()) f[field] = t[field];
        tools.push_back({{"type", "function"}, {"function", std::move(f)}});
      }
      if (!tools.empty()) chat["tools"] = std::move(tools);
      echo[k] = v;
    } else if (k == "tool_choice") {
      if (v.is_string()) {
        chat["tool_choice"] = v;
      } else if (TextField(v, "type") == "function" && v.contains("name")) {
        chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", v["name"]}}}};
      } else if (!v.is_null()) {
        return RequestError(error, k,
                            "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
      }
      echo[k] = v.is_null() ? ojson("auto") : v;
    } else if (k == "text") {
      if (v.is_null()) continue;
      if (!v.is_object()) return RequestError(error, k, "'text' must be an object");
      if (v.contains("verbosity") && !v["verbosity"].is_null())
        return RequestError(error, k, "'text.verbosity' is not supported yet (it asks for verbosity control)");
      if (v.contains("format") && !v["format"].is_null()) {
        const ojson& f = v["format"];
        const std::string type = TextField(f, "type");
        if (type == "json_schema") {
          if (f.contains("name") && !f["name"].is_string())
            return RequestError(error, k, "'text.format.name' must be a string");
          ojson js = {{"name", TextField(f, "name", "response")}};
          if (f.contains("schema")) js["schema"] = f["schema"];
          if (f.contains("strict")) js["strict"] = f["strict"];
          chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
        } else if (type == "json_object" || type == "text") {
          chat["response_format"] = {{"type", type}};
        } else {
          return RequestError(error, k, "'text.format.type' must be text, json_object or json_schema");
        }
      }
      echo[k] = v;
    } else if (k == "max_output_tokens") {
      // Checked here, so that the error names this request's field, not the chat request's.
      if (!v.is_null() && (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 30)))
        return RequestError(error, k,
                            absl::StrCat("'max_output_tokens' must be between 1 and 1073741824, got ", v.dump()));
      chat["max_completion_tokens"] = v;
      echo[k] = v;
    } else if (k == "temperature" || k == "top_p") {
      chat[k] = v;
      echo[k] = v;
    } else if (k == "top_k" || k == "min_p" || k == "repetition_penalty" || k == "seed" || k == "stop" ||
               k == "chat_template_kwargs") {
      chat[k] = v;  // vLLM's extras of a chat request
    } else if (k == "parallel_tool_calls") {
      if (!v.is_null()) chat[k] = v;
      if (v.is_boolean()) echo[k] = v;
    } else if (k == "stream") {
      if (!v.is_null() && !v.is_boolean()) return RequestError(error, k, "'stream' must be true or false");
      out.stream = v.is_boolean() && v.get<bool>();
      chat[k] = out.stream;
    } else if (k == "metadata") {
      if (!v.is_null()) echo[k] = v;
    } else if (k == "max_tool_calls") {
      // A limit on calls to built-in (hosted) tools, of which this server has none: nothing to hold.
      if (!v.is_null() && (!v.is_number_integer() || v.get<int64_t>() < 0))
        return RequestError(error, k, "'max_tool_calls' must be a non-negative integer");
      echo[k] = v;
    } else if (k == "include") {
      // Of what may be included, only the message's logprobs exist here (the rest belong to hosted
      // tools and encrypted reasoning this server does not have).
      if (v.is_null()) continue;
      if (!v.is_array()) return RequestError(error, k, "'include' must be a list of strings");
      for (const ojson& what : v) {
        if (!what.is_string()) return RequestError(error, k, "'include' must be a list of strings");
        if (what == "message.output_text.logprobs") out.logprobs = true;
      }
    } else if (k == "top_logprobs") {
      if (!v.is_null() && (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 20))
        return RequestError(error, k, absl::StrCat("'top_logprobs' must be between 0 and 20, got ", v.dump()));
      echo[k] = v;
    } else if (k == "user" || k == "safety_identifier" || k == "prompt_cache_key" || k == "prompt_cache_retention" ||
               k == "service_tier" || k == "stream_options" || k == "store" || k == "previous_response_id" ||
               k == "background" || k == "truncation" || k == "reasoning" ||
               std::find_if(refused.begin(), refused.end(), [&](const auto& r) { return k == r.first; }) !=
                   refused.end()) {
      // Ignored (they label the request or tune delivery), or checked above as asking for nothing.
    } else {
      return RequestError(error, k, absl::StrCat("'", k, "' is not a request field of /v1/responses"));
    }
  }
  if (!j.contains("input")) return RequestError(error, "input", "'input' is required");
  // Logprobs come with the message when included, with top_logprobs alternatives (0 unless set).
  if (out.logprobs) {
    chat["logprobs"] = true;
    chat["top_logprobs"] =
        echo.contains("top_logprobs") && !echo["top_logprobs"].is_null() ? echo["top_logprobs"] : ojson(0);
  }
  if (out.background && out.stream)
    return RequestError(error, "background",
                        "'background' with 'stream' is not supported: poll GET /v1/responses/{id} instead");
  // A previous response's conversation comes first; its instructions are not carried over.
  chat["messages"].insert(chat["messages"].begin(), previous.begin(), previous.end());
  out.conversation = chat["messages"];
  if (!echo["instructions"].is_null())
    chat["messages"].insert(chat["messages"].begin(), ojson{{"role", "system"}, {"content", echo["instructions"]}});
  out.chat_body = chat.dump();
  out.echo = std::move(echo);
  return out;
}

namespace {

// The output items of a reply, in the order reasoning, message, function calls; a reply with
// nothing in it is one empty message unless `empty_ok`.
ojson OutputItems(const std::string& id, const Choice& reply, bool empty_ok, const ojson& logprobs = ojson::array()) {
  const std::string suffix = id.substr(id.find('_') + 1);
  ojson output = ojson::array();
  if (!reply.reasoning.empty()) output.push_back(ReasoningItem("rs_" + suffix, reply.reasoning, "completed"));
  if (!reply.text.empty() || (reply.tool_calls.empty() && reply.reasoning.empty() && !empty_ok))
    output.push_back(MessageItem("msg_" + suffix, reply.text, "completed", logprobs));
  for (size_t i = 0; i < reply.tool_calls.size(); ++i)
    output.push_back(CallItem(absl::StrCat("fc_", suffix, "_", i), reply.tool_calls[i], reply.tool_calls[i].arguments,
                              "completed"));
  return output;
}

}  // namespace

ojson UnfinishedResponse(const ResponsesRequest& req, const std::string& id, int64_t created, const std::string& model,
                         const char* status, const Choice& reply, const ApiError* error) {
  ojson output = OutputItems(id, reply, /*empty_ok=*/true);
  for (ojson& item : output) item["status"] = "incomplete";
  ojson r = Response(req, id, created, model, std::move(output), status, std::nullopt, false);
  if (error) r["error"] = {{"code", error->type}, {"message", error->message}};
  return r;
}

ojson TextLogprobs(const ResponsesRequest& req, const ParsedRequest& r, const std::vector<TokenLogprob>& lps,
                   const ApiContext& ctx) {
  return req.logprobs ? ojson(LogprobContentJson(r, lps, ctx)) : ojson::array();
}

ojson ResponseBody(const ResponsesRequest& req, const std::string& id, int64_t created, const std::string& model,
                   const Choice& reply, const Usage& usage, const ojson& logprobs) {
  ojson output = OutputItems(id, reply, /*empty_ok=*/false, logprobs);
  const bool incomplete = reply.finish == FinishReason::kLength && !reply.tool_calls_made;
  return Response(req, id, created, model, std::move(output), incomplete ? "incomplete" : "completed", usage, incomplete);
}

std::optional<ParsedRequest> ParseResponsesRequest(const ResponsesRequest& req, const ApiContext& ctx,
                                                   ApiError* error) {
  std::optional<ParsedRequest> parsed = ParseRequest(Endpoint::kChat, req.chat_body, ctx, error);
  if (parsed || !req.truncate) return parsed;
  // Truncation: the leading system messages (the instructions) stay; the conversation after them
  // may start at any later user message, so that a call is never parted from its output. The
  // fewest turns dropped that let the prompt fit, found by bisection (the prompt only shrinks as
  // more is dropped); a request that fails for another reason fails with every cut.
  ojson chat = ojson::parse(req.chat_body);
  const ojson messages = chat["messages"];
  size_t lead = 0;
  while (lead < messages.size() &&
         (messages[lead].value("role", "") == "system" || messages[lead].value("role", "") == "developer"))
    ++lead;
  std::vector<size_t> cuts;
  for (size_t i = lead + 1; i < messages.size(); ++i)
    if (messages[i].value("role", "") == "user") cuts.push_back(i);
  const auto attempt = [&](size_t k, ApiError* err) {
    ojson kept = ojson::array();
    for (size_t i = 0; i < lead; ++i) kept.push_back(messages[i]);
    for (size_t i = cuts[k]; i < messages.size(); ++i) kept.push_back(messages[i]);
    chat["messages"] = std::move(kept);
    return ParseRequest(Endpoint::kChat, chat.dump(), ctx, err);
  };
  ApiError ignored;
  if (cuts.empty() || !attempt(cuts.size() - 1, &ignored)) return std::nullopt;  // *error: the whole request's
  size_t lo = 0, hi = cuts.size() - 1;  // the first cut that fits lies in [lo, hi]; hi fits
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (attempt(mid, &ignored)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return attempt(hi, error);
}

bool StillRunning(const ojson& response) {
  const std::string status = response.value("status", "");
  return status == "queued" || status == "in_progress";
}

ResponseStore::Entry StoredResponse(const ResponsesRequest& req, const ojson& response, const Choice& reply) {
  ojson message = {{"role", "assistant"}, {"content", reply.text}};
  if (!reply.reasoning.empty()) message["reasoning_content"] = reply.reasoning;
  if (!reply.tool_calls.empty()) {
    ojson calls = ojson::array();
    for (const chat::ToolCallDelta& c : reply.tool_calls)
      calls.push_back(
          {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    message["tool_calls"] = std::move(calls);
  }
  ojson conversation = req.conversation;
  conversation.push_back(std::move(message));
  // Items sent without an id get one: the type's prefix, the response id's suffix, the position.
  ojson items = req.input_items;
  const std::string id = response.value("id", "");
  const std::string suffix = id.substr(id.find('_') + 1);
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].contains("id") && items[i]["id"].is_string()) continue;
    const std::string type = TextField(items[i], "type");
    const char* prefix = type == "function_call"          ? "fc_"
                         : type == "function_call_output" ? "fco_"
                         : type == "reasoning"            ? "rs_"
                                                          : "msg_";
    items[i]["id"] = absl::StrCat(prefix, suffix, "_in", i);
  }
  return {response.dump(), conversation.dump(), items.dump()};
}

std::optional<ojson> InputItemsPage(const std::string& stored, std::string_view query, ApiError* error) {
  ojson items = ojson::parse(stored);
  const std::string order = FormValue(query, "order").value_or("desc");
  if (order != "asc" && order != "desc")
    return RequestError(error, "order", absl::StrCat("'order' must be asc or desc, got '", order, "'"));
  if (order == "desc") std::reverse(items.begin(), items.end());
  int64_t limit = 20;
  if (std::optional<std::string> v = FormValue(query, "limit");
      v && (!absl::SimpleAtoi(*v, &limit) || limit < 1 || limit > 100))
    return RequestError(error, "limit", absl::StrCat("'limit' must be between 1 and 100, got '", *v, "'"));
  size_t first = 0;
  if (std::optional<std::string> after = FormValue(query, "after")) {
    auto it =
        std::find_if(items.begin(), items.end(), [&](const ojson& item) { return TextField(item, "id") == *after; });
    if (it == items.end())
      return RequestError(error, "after", absl::StrCat("'after' names no input item of this response: '", *after, "'"));
    first = static_cast<size_t>(it - items.begin()) + 1;
  }
  ojson data = ojson::array();
  for (size_t i = first; i < items.size() && data.size() < static_cast<size_t>(limit); ++i) data.push_back(items[i]);
  const bool more = first + data.size() < items.size();
  ojson page = {{"object", "list"}, {"data", data}};
  page["first_id"] = data.empty() ? ojson(nullptr) : data[0]["id"];
  page["last_id"] = data.empty() ? ojson(nullptr) : data[data.size() - 1]["id"];
  page["has_more"] = more;
  return page;
}

ResponseEvents::ResponseEvents(const ResponsesRequest& req, const ParsedRequest& r, const ApiContext& ctx,
                               std::string id, int64_t created, std::string model)
    : req_(req), r_(r), ctx_(ctx), id_(std::move(id)), model_(std::move(model)), created_(created) {}

ojson ResponseEvents::MessageLogprobs(size_t from) const {
  if (!req_.logprobs) return ojson::array();
  const std::vector<TokenLogprob>& lps = reply_.text_logprobs;
  return TextLogprobs(req_, r_, {lps.begin() + static_cast<std::ptrdiff_t>(from), lps.end()}, ctx_);
}

std::string ResponseEvents::Event(const char* type, ojson body) {
  ojson e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto it = body.begin(); it != body.end(); ++it) e[it.key()] = it.value();
  return absl::StrCat("event: ", type, "\ndata: ", WireJson(e), "\n\n");
}

std::string ResponseEvents::Start() {
  const ojson r = Response(req_, id_, created_, model_, ojson::array(), "in_progress", std::nullopt, false);
  std::string out = Event("response.created", {{"response", r}});
  return out + Event("response.in_progress", {{"response", r}});
}

void ResponseEvents::OpenItem(Open kind, std::string* out, const chat::ToolCallDelta* call) {
  Close(out);
  const std::string suffix = absl::StrCat(id_.substr(id_.find('_') + 1), "_", items_.size());
  const int64_t index = static_cast<int64_t>(items_.size());
  open_ = kind;
  text_.clear();
  if (kind == Open::kReasoning) {
    item_ = ReasoningItem("rs_" + suffix, "", "in_progress");
    *out += Event("response.output_item.added", {{"output_index", index}, {"item", item_}});
    *out += Event("response.content_part.added", {{"item_id", item_["id"]}, {"output_index", index}, {"content_index", 0},
                                                  {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
  } else if (kind == Open::kMessage) {
    message_begin_ = sent_;
    item_ = MessageItem("msg_" + suffix, "", "in_progress");
    *out += Event("response.output_item.added", {{"output_index", index}, {"item", item_}});
    *out += Event("response.content_part.added", {{"item_id", item_["id"]},
                                                  {"output_index", index},
                                                  {"content_index", 0},
                                                  {"part", TextPart("", ojson::array())}});
  } else {
    open_call_ = call->index;
    item_ = CallItem("fc_" + suffix, *call, "", "in_progress");
    *out += Event("response.output_item.added", {{"output_index", index}, {"item", item_}});
  }
}

void ResponseEvents::Close(std::string* out) {
  if (open_ == Open::kNone) return;
  const int64_t index = static_cast<int64_t>(items_.size());
  const ojson id = item_["id"];
  if (open_ == Open::kReasoning) {
    *out += Event("response.reasoning_text.done", {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", text_}});
    *out += Event("response.content_part.done", {{"item_id", id}, {"output_index", index}, {"content_index", 0},
                                                 {"part", {{"type", "reasoning_text"}, {"text", text_}}}});
    item_ = ReasoningItem(id, text_, "completed");
  } else if (open_ == Open::kMessage) {
    const ojson logprobs = MessageLogprobs(message_begin_);
    sent_ = reply_.text_logprobs.size();
    *out += Event(
        "response.output_text.done",
        {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", text_}, {"logprobs", logprobs}});
    *out +=
        Event("response.content_part.done",
              {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", TextPart(text_, logprobs)}});
    item_ = MessageItem(id, text_, "completed", logprobs);
  } else {
    *out += Event("response.function_call_arguments.done", {{"item_id", id}, {"output_index", index}, {"arguments", text_}});
    item_["arguments"] = text_;
    item_["status"] = "completed";
  }
  *out += Event("response.output_item.done", {{"output_index", index}, {"item", item_}});
  items_.push_back(item_);
  open_ = Open::kNone;
  open_call_ = -1;
}

std::string ResponseEvents::Delta(const Choice& d) {
  std::string out;
  const auto index = [&] { return static_cast<int64_t>(items_.size()); };
  if (!d.reasoning.empty()) {
    if (open_ != Open::kReasoning) OpenItem(Open::kReasoning, &out);
    text_ += d.reasoning;
    out += Event("response.reasoning_text.delta",
                 {{"item_id", item_["id"]}, {"output_index", index()}, {"content_index", 0}, {"delta", d.reasoning}});
  }
  AppendDelta(&reply_, d);
  if (d.finish != FinishReason::kNone) reply_.finish = d.finish;
  // The message's tokens are the whole reply's (reply_.text_logprobs, AppendDelta's rule): a text
  // delta carries those not sent yet, among them those of any delta before it that added nothing
  // (part of a character); the end of the sequence comes with output_text.done.
  if (!d.text.empty()) {
    if (open_ != Open::kMessage) OpenItem(Open::kMessage, &out);
    text_ += d.text;
    const ojson logprobs = MessageLogprobs(sent_);
    sent_ = reply_.text_logprobs.size();
    out += Event("response.output_text.delta", {{"item_id", item_["id"]},
                                                {"output_index", index()},
                                                {"content_index", 0},
                                                {"delta", d.text},
                                                {"logprobs", logprobs}});
  }
  for (const chat::ToolCallDelta& call : d.tool_calls) {
    if (open_ != Open::kCall || open_call_ != call.index) OpenItem(Open::kCall, &out, &call);
    if (call.arguments.empty()) continue;
    text_ += call.arguments;
    out += Event("response.function_call_arguments.delta",
                 {{"item_id", item_["id"]}, {"output_index", index()}, {"delta", call.arguments}});
  }
  return out;
}

std::string ResponseEvents::Error(const ApiError& e) {
  return Event("error", {{"code", e.type}, {"message", e.message}, {"param", e.param.empty() ? ojson(nullptr) : ojson(e.param)}});
}

std::string ResponseEvents::Finish(const Usage& usage) {
  std::string out;
  Close(&out);
  const bool incomplete = reply_.finish == FinishReason::kLength && !reply_.tool_calls_made;
  final_ = Response(req_, id_, created_, model_, items_, incomplete ? "incomplete" : "completed", usage, incomplete);
  out += Event(incomplete ? "response.incomplete" : "response.completed", {{"response", final_}});
  return out;
}

}  // namespace ls::server
