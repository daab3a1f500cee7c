// Built-in chat templates and their recognition.
#include "engine/tokenizer/chat_template.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ls::tok {
namespace {

// The ChatML template as widely published (no default system message). Jinja source text: the
// "\n" inside are Jinja string escapes, kept verbatim.
constexpr const char* kChatMLJinja =
    R"({% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})";

// Qwen2's ChatML template with a default system message.
constexpr const char* kQwen2Jinja =
    R"({% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})";

constexpr const char* kDefaultSystem = "You are a helpful assistant.";

std::string Squeeze(const std::string& s) {
  std::string out;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) out.push_back(c);
  return out;
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromTemplateString(const std::string& jinja) {
  const std::string s = Squeeze(jinja);
  if (s == Squeeze(kChatMLJinja)) return ChatTemplate(Kind::kChatML);
  if (s == Squeeze(kQwen2Jinja)) return ChatTemplate(Kind::kChatMLDefaultSystem);
  return absl::InvalidArgumentError(
      "chat_template is not one of the built-in templates (ChatML, ChatML with a default system message); "
      "arbitrary Jinja templates are not supported");
}

absl::StatusOr<ChatTemplate> ChatTemplate::ForModelDir(const std::string& dir) {
  const std::string path = dir + "/tokenizer_config.json";
  if (!std::filesystem::exists(path)) return ChatML();
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": invalid JSON"));
  if (!j.contains("chat_template") || j["chat_template"].is_null()) return ChatML();
  if (!j["chat_template"].is_string())
    return absl::InvalidArgumentError(absl::StrCat(path, ": only a single string chat_template is supported"));
  auto t = FromTemplateString(j["chat_template"].get<std::string>());
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", t.status().message()));
  return t;
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                 bool add_generation_prompt) const {
  std::string out;
  if (kind_ == Kind::kChatMLDefaultSystem && (messages.empty() || messages[0].role != "system"))
    absl::StrAppend(&out, "<|im_start|>system\n", kDefaultSystem, "<|im_end|>\n");
  for (const auto& m : messages) absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace ls::tok
