// ChatTemplate (see chat_template.h): template choice and loading as transformers' tokenizer
// loading does, and rendering as its apply_chat_template / render_jinja_template do.
#include "chat/chat_template.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/read_file.h"
#include "jinja/pystr.h"
#include "jinja/python_json.h"
#include "jinja/template.h"

namespace ls::chat {
namespace {

using ojson = nlohmann::ordered_json;

// ChatML as widely published, without a default system message.
constexpr const char* kChatMLJinja =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// transformers' SPECIAL_TOKENS_ATTRIBUTES: the special tokens a template sees by name.
constexpr const char* kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                              "pad_token", "cls_token", "mask_token"};

// Names a message's reasoning may come under; the first present fills reasoning_content and
// thinking (transformers' _alias_reasoning_fields).
constexpr const char* kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};

// Marks the end of the final message for continue_final_message (transformers' tag).
constexpr std::string_view kContinueTag = "CONTINUE_FINAL_MESSAGE_TAG ";

absl::StatusOr<SpecialTokens> ReadSpecialTokens(const ojson& cfg, const std::string& path) {
  SpecialTokens tokens;
  for (const char* name : kSpecialTokenNames) {
    auto it = cfg.find(name);
    if (it == cfg.end() || it->is_null()) continue;
    if (it->is_string()) {
      tokens.emplace_back(name, it->get<std::string>());
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      tokens.emplace_back(name, (*it)["content"].get<std::string>());
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", name, " must be a string or an AddedToken object with a \"content\" string"));
    }
  }
  return tokens;
}

// transformers drops keys whose value is None, then aliases reasoning fields.
absl::StatusOr<ojson> NormalizeMessages(const ojson& messages) {
  if (!messages.is_array()) return absl::InvalidArgumentError("messages must be a list");
  ojson out = ojson::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const ojson& m = messages[i];
    if (!m.is_object()) return absl::InvalidArgumentError(absl::StrCat("messages[", i, "] must be an object"));
    ojson n = ojson::object();
    for (auto it = m.begin(); it != m.end(); ++it)
      if (!it.value().is_null()) n[it.key()] = it.value();
    for (const char* field : kReasoningFields) {
      if (!n.contains(field)) continue;
      const ojson reasoning = n[field];
      ojson aliased = ojson::object();
      aliased["thinking"] = reasoning;
      for (auto it = n.begin(); it != n.end(); ++it) aliased[it.key()] = it.value();
      aliased["reasoning_content"] = reasoning;
      n = std::move(aliased);
      break;
    }
    out.push_back(std::move(n));
  }
  return out;
}

}  // namespace

struct ChatTemplate::State {
  struct Named {
    std::string name;
    std::string source;
    jinja::Template tmpl;
  };
  std::vector<Named> templates;  // "default" first
  SpecialTokens special_tokens;
  std::string origin;

  const Named* Find(const std::string& name) const {
    for (const auto& t : templates)
      if (t.name == name) return &t;
    return nullptr;
  }
};

absl::StatusOr<ChatTemplate> ChatTemplate::Build(std::vector<std::pair<std::string, std::string>> named_sources,
                                                 SpecialTokens special_tokens, std::string origin) {
  auto state = std::make_shared<State>();
  state->special_tokens = std::move(special_tokens);
  state->origin = std::move(origin);
  std::stable_partition(named_sources.begin(), named_sources.end(), [](const auto& p) { return p.first == "default"; });
  for (auto& [name, source] : named_sources) {
    auto t = jinja::Template::Parse(source);
    if (!t.ok()) {
      const std::string which = named_sources.size() > 1 ? absl::StrCat(" (template '", name, "')") : "";
      return absl::Status(t.status().code(), absl::StrCat(state->origin, which, ": ", t.status().message()));
    }
    state->templates.push_back({name, std::move(source), std::move(*t)});
  }
  if (!state->Find("default")) {
    std::string names;
    for (const auto& t : state->templates) absl::StrAppend(&names, names.empty() ? "" : ", ", "'", t.name, "'");
    return absl::InvalidArgumentError(
        absl::StrCat(state->origin, ": none of the chat templates (", names, ") is named 'default'"));
  }
  return ChatTemplate(std::move(state));
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromString(const std::string& source, SpecialTokens special_tokens) {
  return Build({{"default", source}}, std::move(special_tokens), "chat template");
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromFile(const std::string& path, SpecialTokens special_tokens) {
  auto src = ReadFile(path);
  if (!src.ok()) return src.status();
  return Build({{"default", std::move(*src)}}, std::move(special_tokens), path);
}

ChatTemplate ChatTemplate::ChatML() {
  static const ChatTemplate* const kChatML = [] {
    auto t = Build({{"default", kChatMLJinja}}, {}, "built-in ChatML");
    return new ChatTemplate(std::move(*t));  // the constant template parses; tests pin it
  }();
  return *kChatML;
}

absl::StatusOr<ChatTemplate> ChatTemplate::ForModelDir(const std::string& dir, const std::string& template_file) {
  namespace fs = std::filesystem;
  const std::string config_path = dir + "/tokenizer_config.json";
  ojson cfg = ojson::object();
  std::error_code ec;
  if (fs::exists(config_path, ec)) {
    auto text = ReadFile(config_path);
    if (!text.ok()) return text.status();
    cfg = ojson::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (cfg.is_discarded() || !cfg.is_object())
      return absl::InvalidArgumentError(absl::StrCat(config_path, ": invalid JSON"));
  }
  auto tokens = ReadSpecialTokens(cfg, config_path);
  if (!tokens.ok()) return tokens.status();

  if (!template_file.empty()) {
    auto src = ReadFile(template_file);
    if (!src.ok()) return src.status();
    return Build({{"default", std::move(*src)}}, std::move(*tokens), template_file);
  }

  // chat_template.jinja and additional_chat_templates/*.jinja take priority over the config.
  std::vector<std::pair<std::string, std::string>> named;
  const std::string jinja_path = dir + "/chat_template.jinja";
  if (fs::exists(jinja_path, ec)) {
    auto src = ReadFile(jinja_path);
    if (!src.ok()) return src.status();
    named.emplace_back("default", std::move(*src));
  }
  const fs::path extra_dir = fs::path(dir) / "additional_chat_templates";
  if (fs::is_directory(extra_dir, ec)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(extra_dir, ec))
      if (e.path().extension() == ".jinja") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto src = ReadFile(f.string());
      if (!src.ok()) return src.status();
      named.emplace_back(f.stem().string(), std::move(*src));
    }
  }
  if (!named.empty()) return Build(std::move(named), std::move(*tokens), dir + "/chat_template.jinja");

  auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) {
    ChatTemplate chatml = ChatML();
    auto state = std::make_shared<State>(*chatml.state_);
    state->special_tokens = std::move(*tokens);
    return ChatTemplate(std::move(state));
  }
  const std::string origin = config_path + " chat_template";
  if (it->is_string()) return Build({{"default", it->get<std::string>()}}, std::move(*tokens), origin);
  if (it->is_array()) {
    for (const auto& e : *it) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") ||
          !e["template"].is_string())
        return absl::InvalidArgumentError(
            absl::StrCat(origin, ": each entry of a list must be {\"name\": string, \"template\": string}"));
      named.emplace_back(e["name"].get<std::string>(), e["template"].get<std::string>());
    }
    return Build(std::move(named), std::move(*tokens), origin);
  }
  return absl::InvalidArgumentError(absl::StrCat(origin, " must be a string or a list of {name, template}"));
}

absl::StatusOr<std::string> ChatTemplate::Render(const ChatRequestInputs& in) const {
  const State::Named* t =
      !in.tools.is_null() && state_->Find("tool_use") ? state_->Find("tool_use") : state_->Find("default");
  auto messages = NormalizeMessages(in.messages);
  if (!messages.ok()) return messages.status();
  if (!in.chat_template_kwargs.is_object()) return absl::InvalidArgumentError("chat_template_kwargs must be an object");

  std::string final_text;  // continue_final_message: the text the prompt must end with
  if (in.continue_final_message) {
    if (in.add_generation_prompt)
      return absl::InvalidArgumentError("continue_final_message and add_generation_prompt cannot both be set");
    if (messages->empty())
      return absl::InvalidArgumentError("continue_final_message needs a final message to continue");
    ojson& last = messages->back();
    if (!last.contains("role") || last["role"] != "assistant")
      return absl::InvalidArgumentError("continue_final_message needs the last message to be an assistant message");
    if (!last.contains("content"))
      return absl::InvalidArgumentError(
          "continue_final_message is set but the final message has no content to continue");
    if (t->source.find("content") == std::string::npos)
      return absl::InvalidArgumentError("continue_final_message is set but the chat template does not read 'content'");
    ojson& content = last["content"];
    bool tagged = false;
    if (content.is_string()) {
      final_text = content.get<std::string>();
      content = final_text + std::string(kContinueTag);
      tagged = true;
    } else if (content.is_array()) {
      for (auto part = content.rbegin(); part != content.rend() && !tagged; ++part) {
        if (part->is_object() && part->contains("text") && (*part)["text"].is_string()) {
          final_text = (*part)["text"].get<std::string>();
          (*part)["text"] = final_text + std::string(kContinueTag);
          tagged = true;
        }
      }
    }
    if (!tagged)
      return absl::InvalidArgumentError("continue_final_message is set but the final message has no text to continue");
  }

  jinja::Dict vars;
  try {
    const int depth = jinja::kMaxValueNesting - 1;
    for (const auto& [name, text] : state_->special_tokens) vars.Set(jinja::Value::Str(name), jinja::Value::Str(text));
    for (auto it = in.chat_template_kwargs.begin(); it != in.chat_template_kwargs.end(); ++it) {
      const std::string& k = it.key();
      if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt")
        return absl::InvalidArgumentError(absl::StrCat("chat_template_kwargs may not set '", k, "'"));
      vars.Set(jinja::Value::Str(k), jinja::FromJson(it.value(), depth));
    }
    vars.Set(jinja::Value::Str("messages"), jinja::FromJson(*messages, depth));
    vars.Set(jinja::Value::Str("tools"), jinja::FromJson(in.tools, depth));
    vars.Set(jinja::Value::Str("documents"), jinja::FromJson(in.documents, depth));
    vars.Set(jinja::Value::Str("add_generation_prompt"), jinja::Value::Bool(in.add_generation_prompt));
  } catch (const jinja::TemplateError& e) {
    return absl::InvalidArgumentError(absl::StrCat("chat request: ", e.what()));
  }

  bool raised = false;
  auto out = t->tmpl.Render(vars, jinja::Limits{}, &raised);
  if (!out.ok()) {
    if (raised) return out.status();
    return absl::Status(out.status().code(), absl::StrCat("chat template ", out.status().message()));
  }
  if (!in.continue_final_message) return out;

  // Cut the prompt right after the final message's text, as transformers does.
  const std::string stripped_final = jinja::py::Strip(final_text, std::nullopt, true, true);
  const std::string_view tag_core = kContinueTag.substr(0, kContinueTag.size() - 1);
  if (out->find(stripped_final) == std::string::npos || out->find(tag_core) == std::string::npos)
    return absl::InvalidArgumentError(
        "continue_final_message is set but the chat template does not render the final message as given");
  const size_t at = out->rfind(tag_core);
  if (out->compare(at, kContinueTag.size(), kContinueTag) == 0) {
    out->resize(at);
  } else {
    *out = jinja::py::Strip(std::string_view(*out).substr(0, at), std::nullopt, false, true);
  }
  return out;
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                 bool add_generation_prompt) const {
  ChatRequestInputs in;
  for (const auto& m : messages) in.messages.push_back({{"role", m.role}, {"content", m.content}});
  in.add_generation_prompt = add_generation_prompt;
  return Render(in);
}

const std::string& ChatTemplate::source() const { return state_->Find("default")->source; }
const std::string& ChatTemplate::origin() const { return state_->origin; }
const SpecialTokens& ChatTemplate::special_tokens() const { return state_->special_tokens; }
bool ChatTemplate::has_template(const std::string& name) const { return state_->Find(name) != nullptr; }

}  // namespace ls::chat
