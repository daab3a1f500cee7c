// The tool-call formats by name.
#include "chat/tool_call_format.h"

namespace ls::chat {

std::vector<std::string> ToolCallFormat::markers() const {
  std::vector<std::string> m = {syntax.call_begin, syntax.call_end};
  if (!syntax.section_begin.empty()) {
    m.push_back(syntax.section_begin);
    m.push_back(syntax.section_end);
  }
  return m;
}

std::unique_ptr<ChatOutputParser> ToolCallFormat::NewParser(ToolParserOptions options) const {
  return std::make_unique<ToolCallParser>(syntax, std::move(options));
}

const ToolCallFormat* FindToolCallFormat(std::string_view name) {
  if (name == "qwen") name = "hermes";  // Qwen2/3 write Hermes' format; vLLM's users know both names
  for (const ToolCallFormat* f :
       {&HermesToolCallFormat(), &DeepSeekV3ToolCallFormat(), &KimiK2ToolCallFormat(), &Glm45ToolCallFormat()})
    if (f->name == name) return f;
  return nullptr;
}

std::vector<std::string> ToolCallFormatNames() {
  return {HermesToolCallFormat().name, DeepSeekV3ToolCallFormat().name, KimiK2ToolCallFormat().name,
          Glm45ToolCallFormat().name};
}

}  // namespace ls::chat
