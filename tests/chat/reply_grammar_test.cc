// Reply grammars: the calls each family's chat template writes (tests/data/chat/tool_call_goldens.json)
// are whole matches and the malformed ones are refused; the server's forced call openings are
// prefixes; random replies the grammar allows always parse as calls whose arguments fit the
// schema; reasoning stays free before the constraint; strict tools refuse what cannot be followed.
#include "chat/reply_grammar.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "chat/tool_call_format.h"
#include "tests/chat/parser_test_util.h"
#include "tests/structured/match_util.h"

namespace ls::chat {
namespace {

using ojson = nlohmann::ordered_json;
using structured::IsPrefix;
using structured::Matches;

ojson ReplyGoldens() {
  std::ifstream in(std::string(LS_TEST_DATA_DIR) + "/chat/tool_call_goldens.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ojson::parse(ss.str());
}

ReplyGrammarSpec Spec(const std::string& format, std::vector<ToolSpec> tools, ToolChoice::Mode mode) {
  ReplyGrammarSpec s;
  s.tools = FindToolCallFormat(format);
  s.functions = std::move(tools);
  s.choice.mode = mode;
  s.spell = [](std::string_view m) { return std::string(m); };
  return s;
}

structured::Grammar Build(const ReplyGrammarSpec& s) {
  auto g = BuildReplyGrammar(s);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : structured::Grammar{};
}

std::vector<ToolSpec> AnyArgumentTools(const ojson& calls) {
  std::vector<ToolSpec> t;
  for (const std::string name : {"get_weather", "search", "no_args"}) t.push_back({name, ojson::object(), false});
  (void)calls;
  return t;
}

TEST(ReplyGrammar, TheCallsTemplatesWriteAreWholeMatchesAndMalformedOnesAreRefused) {
  int checked = 0;
  for (const ojson& c : ReplyGoldens()) {
    const std::string format = c["format"], name = c["name"], output = c["output"];
    const auto tools = AnyArgumentTools(c["tool_calls"]);
    const auto autog = Build(Spec(format, tools, ToolChoice::Mode::kAuto));
    const auto required = Build(Spec(format, tools, ToolChoice::Mode::kRequired));
    if (c["malformed"] == true) {
      if (name.find("left_open") != std::string::npos) continue;  // a prefix, rightly
      EXPECT_FALSE(Matches(autog, output)) << format << "/" << name;
      EXPECT_FALSE(Matches(required, output)) << format << "/" << name;
      continue;
    }
    EXPECT_TRUE(Matches(autog, output)) << format << "/" << name << ":\n" << output;
    if (c["content"] == "" && output.find("Let me") == std::string::npos) {
      EXPECT_TRUE(Matches(required, output)) << format << "/" << name << ":\n" << output;
    }
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST(ReplyGrammar, ForcedCallOpeningsArePrefixes) {
  const std::vector<ToolSpec> tools = {{"get_weather", ojson::parse(R"({"type":"object","properties":{"city":{"type":"string"}}})"), false},
                                       {"search", ojson::object(), false}};
  for (const std::string& f : ToolCallFormatNames()) {
    const ToolCallFormat* format = FindToolCallFormat(f);
    const auto required = Build(Spec(f, tools, ToolChoice::Mode::kRequired));
    EXPECT_TRUE(IsPrefix(required, format->forced_call_prefix("", 0))) << f;
    EXPECT_TRUE(IsPrefix(required, format->forced_call_prefix("get_weather", 3))) << f;
    auto named = Spec(f, tools, ToolChoice::Mode::kFunction);
    named.choice.function = "search";
    const auto g = Build(named);
    EXPECT_TRUE(IsPrefix(g, format->forced_call_prefix("search", 0))) << f;
    EXPECT_FALSE(IsPrefix(g, format->forced_call_prefix("get_weather", 0))) << f;
  }
}

// A random reply the grammar allows, a byte at a time, leaning towards closing what is open so
// that it ends; empty when it does not end within the budget.
std::string RandomReply(const structured::Grammar& grammar, std::mt19937& rng) {
  structured::CompiledGrammar g(grammar, structured::ByteTrie(), "test");
  int32_t s = g.Initial();
  std::string out;
  for (int step = 0; step < 4000; ++step) {
    if (g.Final(s)) return out;
    std::vector<uint8_t> allowed, closing;
    for (int b = 0; b < 256; ++b)
      if (g.Next(s, static_cast<uint8_t>(b)) >= 0) {
        allowed.push_back(static_cast<uint8_t>(b));
        if (std::string("}]\"<>`\n").find(static_cast<char>(b)) != std::string::npos) closing.push_back(static_cast<uint8_t>(b));
      }
    if (allowed.empty()) return "";
    const auto& pick = !closing.empty() && rng() % 3 == 0 ? closing : allowed;
    const uint8_t b = pick[rng() % pick.size()];
    out.push_back(static_cast<char>(b));
    s = g.Next(s, b);
  }
  return "";
}

TEST(ReplyGrammar, RandomRequiredRepliesAlwaysParseAsCallsThatFitTheSchema) {
  const ojson weather = ojson::parse(R"({"type":"object","properties":{
      "city":{"type":"string","maxLength":6},"days":{"type":"integer","minimum":1,"maximum":7},
      "unit":{"enum":["c","f"]}},"required":["city","days"]})");
  const std::vector<ToolSpec> tools = {{"get_weather", weather, true}};
  for (const std::string& f : ToolCallFormatNames()) {
    auto spec = Spec(f, tools, ToolChoice::Mode::kRequired);
    spec.parallel_tool_calls = false;
    const auto g = Build(spec);
    std::mt19937 rng(11);
    int parsed = 0;
    for (int i = 0; i < 30; ++i) {
      const std::string text = RandomReply(g, rng);
      if (text.empty()) continue;
      const Reply r = Parse(FindToolCallFormat(f)->NewParser({}), {text});
      ASSERT_EQ(r.delta.tool_calls.size(), 1u) << f << ": " << text << "\n" << r.warning;
      EXPECT_EQ(r.delta.content, "") << f << ": " << text;
      const ToolCallDelta& call = r.delta.tool_calls[0];
      EXPECT_EQ(call.name, "get_weather");
      const ojson args = ojson::parse(call.arguments);
      ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << f << ": " << call.arguments;
      EXPECT_LE(args["city"].get<std::string>().size(), 6u * 4);
      ASSERT_TRUE(args.contains("days") && args["days"].is_number_integer()) << call.arguments;
      EXPECT_GE(args["days"].get<int>(), 1);
      EXPECT_LE(args["days"].get<int>(), 7);
      if (args.contains("unit")) {
        EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f");
      }
      ++parsed;
    }
    EXPECT_GE(parsed, 20) << f;
  }
}

TEST(ReplyGrammar, AutoLeavesContentFreeUntilTheCallSyntaxBegins) {
  const std::vector<ToolSpec> tools = {{"search", ojson::parse(R"({"type":"object","properties":{"q":{"type":"string"}},"required":["q"]})"), false}};
  const auto g = Build(Spec("hermes", tools, ToolChoice::Mode::kAuto));
  EXPECT_TRUE(Matches(g, "Any text at all, <tool or </tool_call> even."));
  EXPECT_TRUE(Matches(g, "Looking.\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>"));
  EXPECT_FALSE(IsPrefix(g, "Looking.<tool_call>\n{\"name\": \"other\""));
  EXPECT_FALSE(IsPrefix(g, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"z\""));
  // After the calls the reply ends.
  EXPECT_FALSE(IsPrefix(g, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>\nmore"));
}

TEST(ReplyGrammar, ReasoningStaysFreeAndTheConstraintStartsAfterIt) {
  auto spec = Spec("hermes", {}, ToolChoice::Mode::kAuto);
  spec.tools = nullptr;
  spec.content = {structured::OutputConstraint::Kind::kRegex, "[0-9]+", {}};
  spec.reasoning = ReplyGrammarSpec::Reasoning::kOpen;
  const auto open = Build(spec);
  EXPECT_TRUE(Matches(open, "Let me think: {not json} </thin> ...</think>\n\n42"));
  EXPECT_FALSE(Matches(open, "42"));
  spec.reasoning = ReplyGrammarSpec::Reasoning::kMayOpen;
  const auto may = Build(spec);
  EXPECT_TRUE(Matches(may, "42"));
  EXPECT_TRUE(Matches(may, "<think>hmm</think>\n7"));
  EXPECT_FALSE(Matches(may, "hmm</think>7"));
}

TEST(ReplyGrammar, StrictToolsRefuseWhatTheyCannotFollowAndOthersTakeAnyObject) {
  const ojson odd = ojson::parse(R"({"type":"object","patternProperties":{"^x":{}}})");
  auto strict = Spec("hermes", {{"f", odd, true}}, ToolChoice::Mode::kRequired);
  auto g = BuildReplyGrammar(strict);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("tool 'f' (strict)"), std::string::npos) << g.status();
  EXPECT_NE(g.status().message().find("patternProperties"), std::string::npos) << g.status();
  const auto loose = Build(Spec("hermes", {{"f", odd, false}}, ToolChoice::Mode::kRequired));
  EXPECT_TRUE(Matches(loose, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x1\": [1]}}\n</tool_call>"));
}

// A schema that can never finish (`{"$ref": "#"}`: itself all the way down) is one the compiler
// cannot follow, seen alone: inside the reply's grammar the call (or the content) would be
// dropped without a word, the reply left to the other alternative.
TEST(ReplyGrammar, SchemasThatNeverFinishAreRefusedNotDropped) {
  const ojson loop = ojson::parse(R"({"$ref": "#"})");
  auto strict =
      BuildReplyGrammar(Spec("hermes", {{"f", loop, true}, {"g", ojson::object(), false}}, ToolChoice::Mode::kAuto));
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("tool 'f' (strict): JSON schema: the grammar matches no text"),
            std::string::npos)
      << strict.status();
  const auto loose = Build(Spec("hermes", {{"f", loop, false}}, ToolChoice::Mode::kRequired));
  EXPECT_TRUE(Matches(loose, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"));
  auto content = Spec("hermes", {{"f", ojson::object(), false}}, ToolChoice::Mode::kAuto);
  content.content.kind = structured::OutputConstraint::Kind::kJsonSchema;
  content.content.text = loop.dump();
  auto g = BuildReplyGrammar(content);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("JSON schema: the grammar matches no text"), std::string::npos) << g.status();
}

TEST(ReplyGrammar, SpecialTokenMarkersMatchOnlyAsTheirTokens) {
  auto spec = Spec("kimi_k2", {{"f", ojson::object(), false}}, ToolChoice::Mode::kRequired);
  spec.spell = [](std::string_view m) { return structured::SpecialToken(m); };
  const auto g = Build(spec);
  const auto special = [](std::string_view m) { return structured::SpecialToken(m); };
  const std::string as_tokens = special("<|tool_calls_section_begin|>") + special("<|tool_call_begin|>") + "functions.f:0" +
                                special("<|tool_call_argument_begin|>") + "{}" + special("<|tool_call_end|>") +
                                special("<|tool_calls_section_end|>");
  EXPECT_TRUE(Matches(g, as_tokens));
  EXPECT_FALSE(IsPrefix(g, "<|tool_calls_section_begin|>"));  // spelled out as text: not the token
  // Free text never holds a special token.
  auto autos = spec;
  autos.choice.mode = ToolChoice::Mode::kAuto;
  const auto a = Build(autos);
  EXPECT_TRUE(IsPrefix(a, "plain <|tool_calls_section_begin|> text"));
  EXPECT_FALSE(IsPrefix(a, "plain " + special("<|im_end|>")));
  EXPECT_TRUE(IsPrefix(a, "plain " + special("<|tool_calls_section_begin|>")));
}

}  // namespace
}  // namespace ls::chat
