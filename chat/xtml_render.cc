// Rendering a chat request to Kimi K3's XTML token ids.
#include "chat/xtml_render.h"

#include <optional>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "chat/xtml_messages.h"

namespace ls::chat::xtml {
namespace {

using ojson = nlohmann::ordered_json;
using Attrs = std::vector<std::pair<std::string_view, std::string>>;

// The bodies of the system messages the renderer adds itself. They are prompt text the model was
// trained on, so they are written exactly as K3's reference encoder writes them.
constexpr char kToolDeclareHead[] = "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n";
constexpr char kJsonFenceEnd[] = "\n```";
constexpr char kThinkingEffortHead[] =
    "`thinking_effort` guides on how much to think in your thinking channel (not including the response "
    "channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with "
    "`thinking_effort=";
constexpr char kToolChoiceRequired[] =
    "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.";
constexpr char kToolChoiceNone[] =
    "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.";
constexpr char kRawJsonRule[] =
    "Your response must be raw JSON data without markdown code blocks (```json) or any additional formatting.";
constexpr char kJsonObjectHead[] = "The system is invoked with `response_format=json_object`.\n";
constexpr char kJsonSchemaHead[] = "The system is invoked with `response_format=json_schema`.\n";
constexpr char kJsonSchemaMiddle[] = "\nThe JSON data must match the following schema:\n```json\n";

absl::Status Bad(std::string_view what) { return absl::InvalidArgumentError(std::string(what)); }

// Appends ids: control ids for structure, everything else encoded as plain text.
class Writer {
 public:
  Writer(const tok::Tokenizer& tokenizer, const ControlIds& ids) : tokenizer_(tokenizer), ids_(ids) {}

  absl::Status Text(std::string_view text) {
    if (text.empty()) return absl::OkStatus();
    auto ids = tokenizer_.Encode(text, tok::EncodeOptions{false, tok::SpecialText::kAsText});
    if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat(where_, ": ", ids.status().message()));
    out_.insert(out_.end(), ids->begin(), ids->end());
    return absl::OkStatus();
  }
  absl::Status Open(std::string_view tag, const Attrs& attrs = {}) {
    out_.push_back(ids_.open);
    if (auto s = Text(tag); !s.ok()) return s;
    for (const auto& [key, value] : attrs) {
      if (auto s = Text(absl::StrCat(" ", std::string(key))); !s.ok()) return s;
      if (auto s = Text("=\""); !s.ok()) return s;
      if (auto s = Text(EscapeAttr(value)); !s.ok()) return s;
      if (auto s = Text("\""); !s.ok()) return s;
    }
    out_.push_back(ids_.sep);
    return absl::OkStatus();
  }
  absl::Status Close(std::string_view tag) {
    out_.push_back(ids_.close);
    if (auto s = Text(tag); !s.ok()) return s;
    out_.push_back(ids_.sep);
    return absl::OkStatus();
  }
  void EndOfMessage() { out_.push_back(ids_.end_of_msg); }

  // A system message the renderer adds (its body is one text piece).
  absl::Status SystemMessage(std::string_view type, std::string_view body) {
    where_ = absl::StrCat("the ", std::string(type), " system message");
    if (auto s = Open(kMessage, {{"role", "system"}, {"type", std::string(type)}}); !s.ok()) return s;
    if (auto s = Text(body); !s.ok()) return s;
    if (auto s = Close(kMessage); !s.ok()) return s;
    EndOfMessage();
    return absl::OkStatus();
  }

  void set_where(std::string where) { where_ = std::move(where); }
  std::vector<int32_t> Take() { return std::move(out_); }

 private:
  const tok::Tokenizer& tokenizer_;
  const ControlIds ids_;
  std::string where_ = "chat request";
  std::vector<int32_t> out_;
};

Attrs MessageAttrs(const XtmlMessage& m) {
  Attrs attrs{{"role", m.role}};
  if (m.role == "tool") {
    attrs.emplace_back("tool", m.tool);
    attrs.emplace_back("index", std::to_string(m.tool_index));
  } else if (!m.name.empty()) {
    attrs.emplace_back("name", m.name);
  }
  return attrs;
}

absl::Status WriteParts(Writer& w, const std::vector<std::string>& parts) {
  for (const std::string& part : parts)
    if (auto s = w.Text(part); !s.ok()) return s;
  return absl::OkStatus();
}

bool HasText(const std::vector<std::string>& parts) {
  for (const std::string& part : parts)
    if (!part.empty()) return true;
  return false;
}

absl::Status WriteToolCalls(Writer& w, const std::vector<XtmlToolCall>& calls) {
  if (auto s = w.Open(kTools); !s.ok()) return s;
  for (size_t i = 0; i < calls.size(); ++i) {
    const XtmlToolCall& call = calls[i];
    if (auto s = w.Open(kCall, {{"tool", call.name}, {"index", std::to_string(i + 1)}}); !s.ok()) return s;
    if (call.arguments.raw_json) {
      if (auto s = w.Open(kJson, {{"type", "object"}}); !s.ok()) return s;
      if (auto s = w.Text(*call.arguments.raw_json); !s.ok()) return s;
      if (auto s = w.Close(kJson); !s.ok()) return s;
    } else {
      for (const ToolArgument& arg : call.arguments.entries) {
        if (auto s = w.Open(kArgument, {{"key", arg.key}, {"type", arg.type}}); !s.ok()) return s;
        if (auto s = w.Text(arg.text); !s.ok()) return s;
        if (auto s = w.Close(kArgument); !s.ok()) return s;
      }
    }
    if (auto s = w.Close(kCall); !s.ok()) return s;
  }
  return w.Close(kTools);
}

// An assistant message; `left_open` writes it as continue_final_message leaves it: cut right after
// its text, inside the response channel (or the think channel when it has reasoning only).
absl::Status WriteAssistant(Writer& w, const XtmlMessage& m, bool thinking, bool left_open) {
  if (auto s = w.Open(kMessage, MessageAttrs(m)); !s.ok()) return s;
  if (thinking) {
    if (auto s = w.Open(kThink); !s.ok()) return s;
    if (auto s = w.Text(m.reasoning); !s.ok()) return s;
    if (left_open && !HasText(m.parts)) return absl::OkStatus();
    if (auto s = w.Close(kThink); !s.ok()) return s;
  }
  if (auto s = w.Open(kResponse); !s.ok()) return s;
  if (auto s = WriteParts(w, m.parts); !s.ok()) return s;
  if (left_open) return absl::OkStatus();
  if (auto s = w.Close(kResponse); !s.ok()) return s;
  if (!m.calls.empty())
    if (auto s = WriteToolCalls(w, m.calls); !s.ok()) return s;
  if (auto s = w.Close(kMessage); !s.ok()) return s;
  w.EndOfMessage();
  return absl::OkStatus();
}

absl::Status WriteResponseFormat(Writer& w, const ojson& rf) {
  if (rf.is_null()) return absl::OkStatus();
  const std::string type = rf.at("type").get<std::string>();
  if (type == "json_object") return w.SystemMessage("response-format", absl::StrCat(kJsonObjectHead, kRawJsonRule));
  // json_schema: {"json_schema": {"schema": {...}}}, also read as json_schema.json_schema or the
  // json_schema object itself, as the reference does.
  ojson schema;
  if (auto it = rf.find("json_schema"); it != rf.end() && !it->is_null()) {
    schema = *it;
    if (it->is_object()) {
      if (auto s = it->find("schema"); s != it->end()) {
        schema = *s;
      } else if (auto j = it->find("json_schema"); j != it->end()) {
        schema = *j;
      }
    }
  }
  return w.SystemMessage("response-format", absl::StrCat(kJsonSchemaHead, kRawJsonRule, kJsonSchemaMiddle,
                                                         CompactSortedJson(schema), kJsonFenceEnd));
}

const ojson* Kwarg(const ojson& kwargs, const char* key) {
  auto it = kwargs.find(key);
  return it == kwargs.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

absl::StatusOr<XtmlOptions> ResolveXtmlOptions(const chat::ChatRequestInputs& inputs) {
  const ojson& kw = inputs.chat_template_kwargs;
  if (!kw.is_object()) return Bad("chat_template_kwargs must be an object");
  XtmlOptions o;
  std::optional<bool> thinking;
  for (const char* key : {"thinking", "enable_thinking"}) {
    if (const ojson* v = Kwarg(kw, key); v != nullptr && !thinking) {
      if (!v->is_boolean()) return Bad(absl::StrCat("chat_template_kwargs.", key, " must be true or false"));
      thinking = v->get<bool>();
    }
  }
  std::optional<std::string> effort;
  if (const ojson* v = Kwarg(kw, "thinking_effort")) {
    if (!v->is_string() || (*v != "low" && *v != "high" && *v != "max"))
      return Bad(
          absl::StrCat("chat_template_kwargs.thinking_effort ", v->dump(), " is not supported (low, high, max)"));
    effort = v->get<std::string>();
  }
  if (const ojson* v = Kwarg(kw, "reasoning_effort")) {
    const std::string e = v->is_string() ? v->get<std::string>() : "";
    std::string mapped;
    if (e == "minimal" || e == "low") {
      mapped = "low";
    } else if (e == "medium" || e == "high") {
      mapped = "high";
    } else if (e == "max") {
      mapped = "max";
    } else if (e != "none") {
      return Bad(
          absl::StrCat("reasoning_effort ", v->dump(), " is not supported (none, minimal, low, medium, high, max)"));
    }
    if (e == "none" && !thinking) thinking = false;
    if (!mapped.empty() && !effort) effort = mapped;
  }
  o.thinking = thinking.value_or(true);
  if (effort) o.thinking_effort = *effort;

  if (const ojson* v = Kwarg(kw, "tool_choice")) {
    if (v->is_string()) {
      if (*v == "required" || *v == "none") {
        o.tool_choice = v->get<std::string>();
      } else if (*v != "auto") {
        return Bad(absl::StrCat("tool_choice ", v->dump(), " is not supported (auto, required, none, or a function)"));
      }
    } else if (!v->is_object()) {
      return Bad("tool_choice must be a string or an object");
    }
  }
  if (const ojson* v = Kwarg(kw, "response_format")) {
    auto type = v->is_object() ? v->find("type") : v->end();
    if (!v->is_object() || type == v->end() || !type->is_string())
      return Bad("response_format must be an object with a string `type`");
    if (*type == "json_object" || *type == "json_schema") {
      o.response_format = *v;
    } else if (*type != "text") {
      return Bad(
          absl::StrCat("response_format.type ", type->dump(), " is not supported (text, json_object, json_schema)"));
    }
  }
  return o;
}

PromptEnd PromptEndOf(const chat::ChatRequestInputs& inputs) {
  auto options = ResolveXtmlOptions(inputs);
  const bool thinking = options.ok() ? options->thinking : true;
  if (inputs.continue_final_message) {
    if (inputs.messages.is_array() && !inputs.messages.empty() && inputs.messages.back().is_object()) {
      const ojson& last = inputs.messages.back();
      auto content = last.find("content");
      auto parts = ReadTextParts(content == last.end() ? ojson() : *content, "content");
      if (parts.ok() && HasText(*parts)) return PromptEnd::kResponse;
    }
    return thinking ? PromptEnd::kThink : PromptEnd::kResponse;
  }
  if (inputs.add_generation_prompt) return thinking ? PromptEnd::kThink : PromptEnd::kResponse;
  return PromptEnd::kOutside;
}

absl::StatusOr<std::vector<int32_t>> RenderXtml(const tok::Tokenizer& tokenizer, const ControlIds& ids,
                                                const chat::ChatRequestInputs& inputs) {
  auto options = ResolveXtmlOptions(inputs);
  if (!options.ok()) return options.status();
  auto messages = ReadXtmlMessages(inputs.messages);
  if (!messages.ok()) return messages.status();
  if (!inputs.tools.is_null() && !inputs.tools.is_array()) return Bad("tools must be a list");
  if (inputs.documents.is_array() ? !inputs.documents.empty() : !inputs.documents.is_null())
    return Bad("documents are not supported by Kimi K3's chat format");
  const bool continuing = inputs.continue_final_message;
  if (continuing) {
    if (inputs.add_generation_prompt) return Bad("continue_final_message and add_generation_prompt cannot both be set");
    if (messages->empty() || messages->back().role != "assistant")
      return Bad("continue_final_message needs the last message to be an assistant message");
    if (!messages->back().calls.empty())
      return Bad("continue_final_message: the last message has tool_calls; only a message's text can be continued");
  }

  Writer w(tokenizer, ids);
  if (inputs.tools.is_array() && !inputs.tools.empty()) {
    auto s =
        w.SystemMessage("tool-declare", absl::StrCat(kToolDeclareHead, CompactSortedJson(inputs.tools), kJsonFenceEnd));
    if (!s.ok()) return s;
  }
  if (options->thinking) {
    auto s = w.SystemMessage("thinking-effort", absl::StrCat(kThinkingEffortHead, options->thinking_effort, "`."));
    if (!s.ok()) return s;
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    const XtmlMessage& m = (*messages)[i];
    w.set_where(absl::StrCat("messages[", m.source, "]"));
    if (m.role == "assistant") {
      auto s = WriteAssistant(w, m, options->thinking, continuing && i + 1 == messages->size());
      if (!s.ok()) return s;
      continue;
    }
    if (auto s = w.Open(kMessage, MessageAttrs(m)); !s.ok()) return s;
    if (auto s = WriteParts(w, m.parts); !s.ok()) return s;
    if (auto s = w.Close(kMessage); !s.ok()) return s;
    w.EndOfMessage();
  }
  if (!continuing) {
    if (!options->tool_choice.empty()) {
      auto s =
          w.SystemMessage("tool-choice", options->tool_choice == "required" ? kToolChoiceRequired : kToolChoiceNone);
      if (!s.ok()) return s;
    }
    if (auto s = WriteResponseFormat(w, options->response_format); !s.ok()) return s;
  }
  if (inputs.add_generation_prompt) {
    w.set_where("the generation prompt");
    if (auto s = w.Open(kMessage, {{"role", "assistant"}}); !s.ok()) return s;
    if (auto s = w.Open(options->thinking ? kThink : kResponse); !s.ok()) return s;
  }
  return w.Take();
}

}  // namespace ls::chat::xtml
