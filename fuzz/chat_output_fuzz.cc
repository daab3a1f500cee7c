// Fuzz target: a model's output -> the chat reply (reasoning, content and tool calls) in each text
// tool-call format (Hermes, DeepSeek-V3, Kimi-K2, GLM-4.5), with and without the think-tag split.
// The first byte picks the format (bits 0-1), the think-tag split (bit 2) and whether the prompt
// opened the think block (bit 3); the rest goes in as generated pieces, split at 0 bytes, then the
// generation finishes. No output may crash a parser, and every tool call that comes out has an id,
// a function name and arguments that are one JSON object: what the server sends as tool_calls
// always parses.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "chat/chat_output_parser.h"
#include "chat/think_tag_parser.h"
#include "chat/tool_call_format.h"
#include "chat/tool_call_parser.h"
#include "nlohmann/json.hpp"

namespace {

const ls::chat::ToolCallFormat& Format(int i) {
  switch (i) {
    case 0:
      return ls::chat::HermesToolCallFormat();
    case 1:
      return ls::chat::DeepSeekV3ToolCallFormat();
    case 2:
      return ls::chat::KimiK2ToolCallFormat();
    default:
      return ls::chat::Glm45ToolCallFormat();
  }
}

// The calls' pieces joined by index: each call has one first piece with its id and name.
struct Calls {
  std::map<int32_t, std::pair<std::string, std::string>> by_index;  // name, arguments
  void Take(const ls::chat::ChatDelta& d) {
    for (const ls::chat::ToolCallDelta& c : d.tool_calls) {
      auto [it, first] = by_index.try_emplace(c.index);
      if (first) {
        if (c.id.empty() || !ls::chat::IsCallName(c.name)) std::abort();
        it->second.first = c.name;
      } else if (!c.id.empty() || !c.name.empty()) {
        std::abort();  // a call's id and name come once
      }
      it->second.second += c.arguments;
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const ls::chat::ToolCallFormat& format = Format(data[0] & 3);
  std::unique_ptr<ls::chat::ChatOutputParser> parser = format.NewParser({});
  if (data[0] & 4) parser = std::make_unique<ls::chat::ThinkTagParser>(std::move(parser), (data[0] & 8) != 0);
  Calls calls;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  while (!rest.empty()) {
    const size_t cut = rest.find('\0');
    calls.Take(parser->Feed(0, rest.substr(0, cut)));
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + 1);
  }
  calls.Take(parser->Finish());
  for (const auto& [index, call] : calls.by_index) {
    const auto args = nlohmann::json::parse(call.second, nullptr, false);
    if (args.is_discarded() || !args.is_object()) std::abort();
  }
  return 0;
}
