// Reply grammars: reasoning, then content or calls.
#include "chat/reply_grammar.h"

#include "absl/strings/str_cat.h"
#include "chat/think_tag_parser.h"
#include "chat/tool_call_format.h"
#include "structured/json_schema.h"

namespace ls::chat {
namespace {

using structured::ByteSet;
using structured::GrammarBuilder;
using structured::Symbol;
using ojson = nlohmann::ordered_json;

// Whitespace between markers (templates write a line break, or DeepSeek-V3's run of spaces).
Symbol Gap(GrammarBuilder& b) {
  ByteSet ws;
  for (char c : std::string(" \t\n\r")) ws.set(static_cast<uint8_t>(c));
  return b.Repeat({b.Bytes(ws)}, 0, 24, "gap");
}

// The calls tool_choice allows, in the family's syntax.
absl::StatusOr<Symbol> Calls(GrammarBuilder& b, const ReplyGrammarSpec& spec) {
  std::vector<std::vector<Symbol>> one;
  for (const ToolSpec& t : spec.functions) {
    if (spec.choice.mode == ToolChoice::Mode::kFunction && t.name != spec.choice.function) continue;
    auto call = spec.tools->call_grammar(b, spec.spell, t);
    if (!call.ok()) return call.status();
    one.push_back(std::move(*call));
  }
  if (one.empty()) return absl::InvalidArgumentError("no tool matches 'tool_choice'");
  const Symbol call = b.OneOf(one, "call");
  // A named function is called once; otherwise as many calls as parallel_tool_calls allows.
  const bool many = spec.parallel_tool_calls && spec.choice.mode != ToolChoice::Mode::kFunction;
  std::vector<Symbol> calls = {call};
  if (many) calls.push_back(b.Repeat({Gap(b), call}, 0, -1, "more-calls"));
  const ToolCallSyntax& syn = spec.tools->syntax;
  if (syn.section_begin.empty()) return b.OneOf({calls}, "calls");
  std::vector<Symbol> section = Marker(b, spec.spell, syn.section_begin);
  section.insert(section.end(), calls.begin(), calls.end());
  section.push_back(Gap(b));
  for (const Symbol& s : Marker(b, spec.spell, syn.section_end)) section.push_back(s);
  return b.OneOf({section}, "calls");
}

}  // namespace

std::vector<ToolSpec> ToolSpecs(const ojson& tools) {
  std::vector<ToolSpec> out;
  if (!tools.is_array()) return out;
  for (const ojson& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
    const ojson& f = t["function"];
    ToolSpec s;
    s.name = f.contains("name") && f["name"].is_string() ? f["name"].get<std::string>() : "";
    s.parameters = f.contains("parameters") && f["parameters"].is_object() ? f["parameters"] : ojson::object();
    s.strict = f.contains("strict") && f["strict"] == true;
    out.push_back(std::move(s));
  }
  return out;
}

std::string ReplyGrammarKey(const ReplyGrammarSpec& spec) {
  ojson k = {{"reasoning", static_cast<int>(spec.reasoning)},
             {"format", spec.tools ? spec.tools->name : ""},
             {"choice", static_cast<int>(spec.choice.mode)},
             {"function", spec.choice.function},
             {"parallel", spec.parallel_tool_calls},
             {"content", spec.content.Key()}};
  ojson fs = ojson::array();
  for (const ToolSpec& t : spec.functions) fs.push_back({t.name, t.parameters, t.strict});
  k["functions"] = std::move(fs);
  return "reply:" + k.dump();
}

std::vector<Symbol> Marker(GrammarBuilder& b, const MarkerSpelling& spell, std::string_view text) {
  return b.Literal(spell ? spell(text) : std::string(text));
}

absl::StatusOr<Symbol> ArgumentsRule(GrammarBuilder& b, const ToolSpec& tool) {
  ojson schema = tool.parameters;
  if (!schema.contains("type") && !schema.contains("$ref") && !schema.contains("anyOf")) schema["type"] = "object";
  // Arguments as templates write them (tojson: compact), not pretty-printed.
  constexpr auto kCompact = structured::JsonWhitespace::kCompact;
  // A schema that can never finish is checked alone first: inside the reply's grammar the call
  // would be dropped without a word.
  absl::Status st = structured::JsonSchemaGrammar(schema).status();
  if (st.ok()) {
    auto rule = structured::AddJsonSchema(b, schema, "arguments of " + tool.name, kCompact);
    if (rule.ok()) return rule;
    st = rule.status();
  }
  // A schema the compiler cannot follow: exact only when the tool is strict; else any object.
  if (tool.strict) return absl::InvalidArgumentError(absl::StrCat("tool '", tool.name, "' (strict): ", st.message()));
  return structured::AddJsonSchema(b, ojson{{"type", "object"}}, "arguments of " + tool.name, kCompact);
}

absl::StatusOr<structured::Grammar> BuildReplyGrammar(const ReplyGrammarSpec& spec) {
  GrammarBuilder b;
  std::vector<Symbol> root;
  // Reasoning: free text up to </think>, then the reply.
  if (spec.reasoning != ReplyGrammarSpec::Reasoning::kNone) {
    const std::string close = spec.spell ? spec.spell(kThinkClose) : std::string(kThinkClose);
    std::vector<Symbol> think = {b.TextWithout(close, "reasoning")};
    for (const Symbol& s : b.Literal(close)) think.push_back(s);
    think.push_back(Gap(b));
    if (spec.reasoning == ReplyGrammarSpec::Reasoning::kOpen) {
      root = think;
    } else {
      std::vector<Symbol> open = Marker(b, spec.spell, kThinkOpen);
      open.insert(open.end(), think.begin(), think.end());
      root.push_back(b.Repeat(open, 0, 1, "think"));
    }
  }
  const bool calls = spec.tools && spec.choice.mode != ToolChoice::Mode::kNone && !spec.functions.empty();
  std::optional<Symbol> content;
  if (!spec.content.empty()) {
    // Checked alone first: beside tool calls, content that can never finish would otherwise be
    // dropped from the reply's grammar without a word.
    if (auto alone = structured::BuildGrammar(spec.content); !alone.ok()) return alone.status();
    auto g = structured::AddConstraint(b, spec.content);
    if (!g.ok()) return g.status();
    content = *g;
  }
  if (!calls) {
    if (!content) return absl::InvalidArgumentError("nothing constrains the reply");
    root.push_back(*content);
  } else {
    auto c = Calls(b, spec);
    if (!c.ok()) return c.status();
    if (spec.choice.mode != ToolChoice::Mode::kAuto) {
      root.push_back(*c);
    } else if (content) {
      root.push_back(b.OneOf({{*content}, {*c}}, "content-or-calls"));
    } else {
      // Free content until the syntax's first marker, then calls (and the reply ends after them).
      const ToolCallSyntax& syn = spec.tools->syntax;
      const std::string trigger = spec.spell(syn.section_begin.empty() ? syn.call_begin : syn.section_begin);
      root.push_back(b.TextWithout(trigger, "content"));
      root.push_back(b.Repeat({*c, Gap(b)}, 0, 1, "calls?"));
    }
  }
  b.AddAlternative(0, root);
  return std::move(b).Finish();
}

}  // namespace ls::chat
