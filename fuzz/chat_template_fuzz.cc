// Fuzz target: Jinja chat-template parsing and rendering. The input is a template, optionally
// followed by a NUL byte and JSON (a list: the messages; an object: extra template variables).
// Whatever the template, loading and rendering must end in output or an error status, within
// the render limits below (small, so that every input runs fast), and a render must be
// deterministic.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "jinja/template.h"
#include "nlohmann/json.hpp"

namespace {

using ojson = nlohmann::ordered_json;

const ojson& BaseVars() {
  static const ojson vars = ojson::parse(R"({
    "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true, "enable_thinking": false,
    "documents": null,
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather \u00e9 \ud83d\ude00",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi <there> & \"you\"\n\u4f60\u597d"},
      {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello", "reasoning_content": "hmm",
       "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
      {"role": "user", "content": [{"type": "text", "text": "part"}, {"type": "image_url", "image_url": {"url": "x"}}]}
    ]})");
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string source = input.substr(0, nul);
  auto tmpl = ls::jinja::Template::Parse(source);
  if (!tmpl.ok()) {
    if (tmpl.status().message().empty()) std::abort();
    return 0;
  }
  ojson vars = BaseVars();
  if (nul != std::string::npos) {
    ojson extra = ojson::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
    if (extra.is_array()) {
      vars["messages"] = std::move(extra);
    } else if (extra.is_object()) {
      for (auto it = extra.begin(); it != extra.end(); ++it) vars[it.key()] = it.value();
    }
  }
  ls::jinja::Limits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_steps = 200000;
  limits.max_depth = 200;
  auto first = tmpl->Render(vars, limits);
  if (!first.ok() && first.status().message().empty()) std::abort();
  if (first.ok() && first->size() > limits.max_output_bytes) std::abort();
  if (source.find("strftime_now") == std::string::npos) {
    auto second = tmpl->Render(vars, limits);
    if (first.ok() != second.ok() || (first.ok() && *first != *second) ||
        (!first.ok() && first.status() != second.status()))
      std::abort();
  }
  return 0;
}
