// Reading chat requests: messages, content parts, tool calls, tools and tool_choice.
#include "server/chat_request.h"

#include <atomic>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ls::server {
namespace {

using ojson = nlohmann::ordered_json;

bool Fail(ApiError* err, std::string message, std::string param) {
  *err = ApiError{400, std::move(message), std::move(param)};
  return false;
}

bool IsOneOf(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

// A message's content: a string, or a list of parts of which only text is served.
bool ReadContent(const ojson& c, const std::string& where, bool as_parts, ojson* out, ApiError* err) {
  if (c.is_string()) {
    *out = c;
    return true;
  }
  if (!c.is_array()) return Fail(err, absl::StrCat("'", where, "' must be a string or a list of content parts"), where);
  std::vector<std::string> texts;
  for (size_t j = 0; j < c.size(); ++j) {
    const ojson& part = c[j];
    const std::string at = absl::StrCat(where, "[", j, "]");
    if (part.is_string()) {
      texts.push_back(part.get<std::string>());
      continue;
    }
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return Fail(err, absl::StrCat("'", at, "' must be a content part with a 'type'"), at);
    const std::string type = part["type"];
    const char* key = IsOneOf(type, {"text", "input_text", "output_text"}) ? "text"
                      : type == "refusal"                                  ? "refusal"
                                                                           : nullptr;
    if (key) {
      auto t = part.find(key);
      if (t == part.end() || !t->is_string())
        return Fail(err, absl::StrCat("'", at, "' is a '", type, "' part without a '", key, "' string"), at);
      texts.push_back(t->get<std::string>());
      continue;
    }
    if (IsOneOf(type, {"image_url", "input_image", "image", "image_pil", "image_embeds", "input_audio", "audio_url",
                       "audio", "audio_embeds", "video_url", "video", "file", "input_file"}))
      return Fail(err,
                  absl::StrCat("'", at, "' is an '", type,
                               "' part, but this server serves text only: image, audio, video and file input are not "
                               "supported (a model's vision or audio tower is not served)"),
                  at);
    return Fail(err, absl::StrCat("'", at, "' has the unknown content part type '", type, "'"), at);
  }
  if (as_parts) {
    *out = ojson::array();
    for (auto& t : texts) out->push_back({{"type", "text"}, {"text", std::move(t)}});
  } else {
    *out = absl::StrJoin(texts, "\n");
  }
  return true;
}

// An assistant message's tool_calls, with each call's arguments as an object (templates expect
// objects; the API sends JSON strings), as vLLM passes them.
bool ReadToolCalls(const ojson& calls, const std::string& where, ojson* out, ApiError* err) {
  if (!calls.is_array()) return Fail(err, absl::StrCat("'", where, "' must be a list"), where);
  *out = ojson::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string at = absl::StrCat(where, "[", k, "]");
    const ojson& call = calls[k];
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      return Fail(err, absl::StrCat("'", at, "' must be an object with a 'function'"), at);
    ojson c = call;
    ojson& fn = c["function"];
    if (!fn.contains("name") || !fn["name"].is_string())
      return Fail(err, absl::StrCat("'", at, ".function.name' must be a string"), at + ".function.name");
    ojson& args = fn["arguments"];
    if (args.is_null() || (args.is_string() && args.get<std::string>().empty())) {
      args = ojson::object();
    } else if (args.is_string()) {
      ojson parsed = ojson::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded())
        return Fail(err, absl::StrCat("'", at, ".function.arguments' is not valid JSON"), at + ".function.arguments");
      args = std::move(parsed);
    }
    out->push_back(std::move(c));
  }
  return true;
}

bool ReadMessages(const ojson* m, bool as_parts, ojson* out, ApiError* err) {
  if (!m) return Fail(err, "'messages' is required", "messages");
  if (!m->is_array()) return Fail(err, "'messages' must be a list", "messages");
  if (m->empty()) return Fail(err, "'messages' must not be empty", "messages");
  *out = ojson::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const ojson& e = (*m)[i];
    const std::string where = absl::StrCat("messages[", i, "]");
    if (!e.is_object()) return Fail(err, absl::StrCat("'", where, "' must be an object"), where);
    auto role = e.find("role");
    if (role == e.end() || !role->is_string() || role->get<std::string>().empty())
      return Fail(err, absl::StrCat("'", where, ".role' is required: a string"), where + ".role");
    const std::string r = *role;
    ojson msg = ojson::object();
    msg["role"] = r;
    auto c = e.find("content");
    if (c == e.end() || c->is_null()) {
      // An assistant turn may be only tool calls; the template then sees empty content, as in vLLM.
      if (r != "assistant") return Fail(err, absl::StrCat("'", where, ".content' is required"), where + ".content");
      msg["content"] = as_parts ? ojson::array() : ojson("");
    } else if (!ReadContent(*c, where + ".content", as_parts, &msg["content"], err)) {
      return false;
    }
    for (const char* key : {"name", "tool_call_id", "reasoning_content", "reasoning", "thinking"}) {
      auto v = e.find(key);
      if (v == e.end() || v->is_null()) continue;
      if (!v->is_string())
        return Fail(err, absl::StrCat("'", where, ".", key, "' must be a string"), where + "." + key);
      msg[key] = *v;
    }
    if (auto calls = e.find("tool_calls"); calls != e.end() && !calls->is_null()) {
      ojson read;
      if (!ReadToolCalls(*calls, where + ".tool_calls", &read, err)) return false;
      if (!read.empty()) msg["tool_calls"] = std::move(read);  // an empty list keeps the plain assistant path
    }
    out->push_back(std::move(msg));
  }
  return true;
}

// The tools' names; every tool must be a function with a name.
bool ReadTools(const ojson* tools, ojson* out, std::set<std::string>* names, ApiError* err) {
  if (!tools || tools->is_null()) return true;
  if (!tools->is_array()) return Fail(err, "'tools' must be a list", "tools");
  for (size_t i = 0; i < tools->size(); ++i) {
    const ojson& t = (*tools)[i];
    const std::string at = absl::StrCat("tools[", i, "]");
    if (!t.is_object()) return Fail(err, absl::StrCat("'", at, "' must be an object"), at);
    if (t.contains("type") && t["type"] != "function")
      return Fail(err, absl::StrCat("'", at, ".type' must be \"function\""), at + ".type");
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string() ||
        (*fn)["name"].get<std::string>().empty())
      return Fail(err, absl::StrCat("'", at, ".function.name' is required"), at + ".function.name");
    if (fn->contains("parameters") && !(*fn)["parameters"].is_object() && !(*fn)["parameters"].is_null())
      return Fail(err, absl::StrCat("'", at, ".function.parameters' must be a JSON Schema object"),
                  at + ".function.parameters");
    if (fn->contains("strict") && !(*fn)["strict"].is_boolean() && !(*fn)["strict"].is_null())
      return Fail(err, absl::StrCat("'", at, ".function.strict' must be true or false"), at + ".function.strict");
    names->insert((*fn)["name"].get<std::string>());
  }
  if (!tools->empty()) *out = *tools;  // as sent, key order kept for the template's tojson
  return true;
}

bool ReadToolChoice(const ojson* c, bool have_tools, const std::set<std::string>& names, chat::ToolChoice* out,
                    ApiError* err) {
  using Mode = chat::ToolChoice::Mode;
  out->mode = have_tools ? Mode::kAuto : Mode::kNone;
  if (!c || c->is_null()) return true;
  if (c->is_string()) {
    const std::string s = *c;
    if (s == "none") return out->mode = Mode::kNone, true;
    if (s == "auto") {
      out->mode = Mode::kAuto;
    } else if (s == "required") {
      out->mode = Mode::kRequired;
    } else {
      return Fail(err, "'tool_choice' must be \"none\", \"auto\", \"required\" or a named function", "tool_choice");
    }
  } else {
    const ojson* name = nullptr;
    if (c->is_object() && c->contains("function") && (*c)["function"].is_object()) name = &(*c)["function"]["name"];
    if (!name || !name->is_string())
      return Fail(err, "'tool_choice' must name its function: {\"type\": \"function\", \"function\": {\"name\": ...}}",
                  "tool_choice");
    out->mode = Mode::kFunction;
    out->function = *name;
    if (have_tools && !names.count(out->function))
      return Fail(err, absl::StrCat("'tool_choice' names the function '", out->function, "', which is not in 'tools'"),
                  "tool_choice");
  }
  if (!have_tools) return Fail(err, "'tool_choice' needs 'tools'", "tool_choice");
  return true;
}

}  // namespace

bool ReadChatRequest(const ChatFields& f, const ApiContext& ctx, ChatRequest* out, ApiError* err) {
  const chat::ChatFormat* format = ctx.chat();
  if (!format) return Fail(err, "this model has no tokenizer, so chat is unavailable", "messages");
  chat::ChatRequestInputs& in = out->inputs;
  if (!ReadMessages(f.messages, format->content_as_parts(), &in.messages, err)) return false;
  std::set<std::string> names;
  if (!ReadTools(f.tools, &in.tools, &names, err)) return false;
  const bool have_tools = !in.tools.is_null();
  chat::ToolChoice& choice = out->render.tool_choice;
  if (!ReadToolChoice(f.tool_choice, have_tools, names, &choice, err)) return false;
  if (have_tools && choice.mode != chat::ToolChoice::Mode::kNone && !format->parses_tool_calls() && !f.prompt_only)
    return Fail(err,
                "'tools': this model's tool calls cannot be read, as it has no tool-call parser; start the server with "
                "--tool_call_parser (hermes, deepseek_v3 or kimi_k2), or send \"tool_choice\": \"none\"",
                "tools");
  if ((choice.mode == chat::ToolChoice::Mode::kRequired || choice.mode == chat::ToolChoice::Mode::kFunction) &&
      !format->forces_tool_calls())
    return Fail(err, "'tool_choice': this model's chat format cannot force a tool call", "tool_choice");
  if (f.chat_template_kwargs && !f.chat_template_kwargs->is_null()) {
    if (!f.chat_template_kwargs->is_object())
      return Fail(err, "'chat_template_kwargs' must be an object", "chat_template_kwargs");
    in.chat_template_kwargs = *f.chat_template_kwargs;
  }
  if (f.reasoning_effort && f.reasoning_effort->is_string() && !in.chat_template_kwargs.contains("reasoning_effort"))
    in.chat_template_kwargs["reasoning_effort"] = *f.reasoning_effort;
  if (f.documents && !f.documents->is_null()) {
    if (!f.documents->is_array()) return Fail(err, "'documents' must be a list", "documents");
    if (!f.documents->empty()) in.documents = *f.documents;
  }
  in.continue_final_message = f.continue_final_message;
  in.add_generation_prompt = f.add_generation_prompt.value_or(!f.continue_final_message);
  if (in.continue_final_message && in.add_generation_prompt)
    return Fail(err, "'continue_final_message' cannot be combined with 'add_generation_prompt': true",
                "continue_final_message");
  out->render.add_special_tokens = f.add_special_tokens;
  out->include_reasoning = f.include_reasoning;
  out->parallel_tool_calls = f.parallel_tool_calls;
  return true;
}

std::shared_ptr<const ChatSession> RenderChat(const ApiContext& ctx, ChatRequest request, ApiError* err) {
  auto session = std::make_shared<ChatSession>();
  session->format = ctx.chat();
  auto prompt = session->format->Render(request.inputs, request.render);
  if (!prompt.ok()) {
    Fail(err, std::string(prompt.status().message()), "messages");
    return nullptr;
  }
  if (!request.inputs.tools.is_null() && !session->format->renders_tools()) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      ctx.Log(LogLevel::kWarning, "tools_not_in_chat_template",
              "\"note\":\"requests send tools, but the chat template never reads 'tools', so the model does not see "
              "them; serve it with --chat_template FILE, a template that declares tools\"");
  }
  session->prompt = std::move(*prompt);
  session->request = std::move(request);
  return session;
}

}  // namespace ls::server
