// The tool-call formats by name, and each family's default.
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

std::string DefaultToolCallFormat(std::string_view family, std::string_view model_type) {
  // Qwen2/3 write Hermes-style <tool_call> JSON; so does this project's own format, whose tiny
  // model speaks ChatML. Kimi-K2 checkpoints are DeepSeek-V3 architecture with their own tokens;
  // Kimi-Linear writes K2's; GLM-4.5 its <arg_key> pairs. Mixtral ([TOOL_CALLS]) writes a format
  // not implemented here; Kimi K3's XTML brings its own parser.
  if (family == "Qwen3-MoE" || family == "Qwen2-MoE" || family == "StableLatentMoE") return "hermes";
  if (model_type == "kimi_k2" || family == "Kimi-Linear") return "kimi_k2";
  if (family == "DeepSeek-V3" || family == "DeepSeek-V2") return "deepseek_v3";
  if (family == "GLM-4-MoE") return "glm45";
  return "";
}

}  // namespace ls::chat
