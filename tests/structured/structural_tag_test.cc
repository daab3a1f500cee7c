// Structural tags: free text around tagged structures whose contents are held to their JSON
// schemas, triggers that can only open a structure, markers that are special tokens, and the tags
// refused with the field named.
#include "structured/structural_tag.h"

#include <gtest/gtest.h>

#include "structured/output_constraint.h"
#include "tests/structured/match_util.h"

namespace ls::structured {
namespace {

using ojson = nlohmann::ordered_json;

const ojson kObjectX = {{"type", "object"},
                        {"properties", {{"x", {{"type", "integer"}}}}},
                        {"required", {"x"}},
                        {"additionalProperties", false}};

ojson Tag() {
  return {{"type", "structural_tag"},
          {"structures",
           {{{"begin", "<f=a>"}, {"schema", kObjectX}, {"end", "</f>"}},
            {{"begin", "<f=b>"}, {"schema", {{"type", "string"}}}, {"end", "</f>"}}}},
          {"triggers", {"<f="}}};
}

Grammar GrammarOf(const ojson& j) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kStructuralTag;
  auto tag = StructuralTag::Parse(j);
  EXPECT_TRUE(tag.ok()) << tag.status();
  c.text = tag->ToJson().dump();
  auto g = BuildGrammar(c);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(StructuralTag, TextIsFreeAroundStructuresHeldToTheirSchemas) {
  const Grammar g = GrammarOf(Tag());
  for (const char* text : {"", "hello", "a < b, f = 1, <f", "hi <f=a>{\"x\": 1}</f> bye",
                           "<f=b>\"s\"</f><f=a>{\"x\":2}</f>", "<f=a>{\"x\": 3}</f>\n<f=a>{\"x\": 4}</f>"})
    EXPECT_TRUE(Matches(g, text)) << text;
  for (const char* text : {"<f=c>{}</f>", "hi <f=a>{\"y\": 1}</f>", "<f=a>{\"x\": 1}", "<f=b>1</f>",
                           "<f=a>{\"x\": 1}</g>", "x <f=a>{\"x\": 1.5}</f>"})
    EXPECT_FALSE(Matches(g, text)) << text;
  EXPECT_TRUE(IsPrefix(g, "text <f=a>{\"x\": 1"));
  EXPECT_FALSE(IsPrefix(g, "text <f=z"));  // a trigger opens only the structures it begins
}

TEST(StructuralTag, SpecialMarkersAreTheSpecialTokensNotTheirText) {
  const ojson j = {{"structures", {{{"begin", "<tool_call>"}, {"schema", kObjectX}, {"end", "</tool_call>"}}}},
                   {"triggers", {"<tool_call>"}},
                   {"special", {"<tool_call>", "</tool_call>"}}};
  const Grammar g = GrammarOf(j);
  EXPECT_TRUE(Matches(g, "see " + SpecialToken("<tool_call>") + "{\"x\": 1}" + SpecialToken("</tool_call>")));
  EXPECT_TRUE(Matches(g, "the text <tool_call> is only text"));
  EXPECT_FALSE(Matches(g, "<tool_call>{\"x\": 1}</tool_call>x" + SpecialToken("</tool_call>")));
}

// The format form: each type, the combinators, and triggered tags and separated tags with
// at_least_one and stop_after_first.
Grammar FormatGrammar(const ojson& format) { return GrammarOf({{"type", "structural_tag"}, {"format", format}}); }

ojson CallTag(const std::string& name) {
  return {{"begin", "<f=" + name + ">"},
          {"content", {{"type", "json_schema"}, {"json_schema", kObjectX}}},
          {"end", "</f>"}};
}

TEST(StructuralTagFormat, BasicFormatsAndCombinators) {
  Grammar g = FormatGrammar({{"type", "const_string"}, {"value", "Let's think."}});
  EXPECT_TRUE(Matches(g, "Let's think."));
  EXPECT_FALSE(Matches(g, "Let's think"));
  g = FormatGrammar(
      {{"type", "sequence"},
       {"elements",
        {{{"type", "regex"}, {"pattern", "[0-9]{2}"}},
         {{"type", "or"},
          {"elements",
           {{{"type", "const_string"}, {"value", "a"}}, {{"type", "grammar"}, {"grammar", "root ::= \"b\"+"}}}}}}}});
  for (const char* t : {"12a", "34bbb"}) EXPECT_TRUE(Matches(g, t)) << t;
  for (const char* t : {"1a", "12ab", "12"}) EXPECT_FALSE(Matches(g, t)) << t;
  // Think first (any text up to the end tag), then text with calls.
  g = FormatGrammar(
      {{"type", "sequence"},
       {"elements",
        {{{"type", "tag"}, {"begin", "<think>"}, {"content", {{"type", "any_text"}}}, {"end", "</think>"}},
         {{"type", "triggered_tags"}, {"triggers", {"<f="}}, {"tags", {CallTag("a"), CallTag("b")}}}}}});
  for (const char* t : {"<think>hm <f=a> no</think>", "<think></think>ok <f=b>{\"x\": 1}</f> done"})
    EXPECT_TRUE(Matches(g, t)) << t;
  for (const char* t : {"ok", "<think>a</think>b<f=a>{}</f>", "<think>x</think><f=c>{}</f>"})
    EXPECT_FALSE(Matches(g, t)) << t;
  // any_text keeps out its excluded strings.
  g = FormatGrammar({{"type", "any_text"}, {"excluded_str", {"BAD", "worse"}}});
  EXPECT_TRUE(Matches(g, "all good"));
  EXPECT_FALSE(Matches(g, "not BAD"));
  EXPECT_FALSE(Matches(g, "worse"));
}

TEST(StructuralTagFormat, TriggeredTagsAtLeastOneAndStopAfterFirst) {
  const auto with = [](bool at_least_one, bool stop_after_first) {
    return FormatGrammar({{"type", "triggered_tags"},
                          {"triggers", {"<f="}},
                          {"tags", {CallTag("a")}},
                          {"at_least_one", at_least_one},
                          {"stop_after_first", stop_after_first}});
  };
  const std::string call = "<f=a>{\"x\": 1}</f>";
  struct Case {
    std::string text;
    bool plain, first, stop, exactly_one;
  };
  const std::vector<Case> cases = {
      {"", true, false, true, false},
      {"hello", true, false, true, false},
      {call, true, true, true, true},
      {"hi " + call, true, false, true, false},
      {call + " bye", true, true, false, false},
      {call + " and " + call, true, true, false, false},
      {"hi " + call + " bye", true, false, false, false},
  };
  const Grammar plain = with(false, false), first = with(true, false), stop = with(false, true), one = with(true, true);
  for (const Case& c : cases) {
    EXPECT_EQ(Matches(plain, c.text), c.plain) << c.text;
    EXPECT_EQ(Matches(first, c.text), c.first) << "at_least_one: " << c.text;
    EXPECT_EQ(Matches(stop, c.text), c.stop) << "stop_after_first: " << c.text;
    EXPECT_EQ(Matches(one, c.text), c.exactly_one) << "both: " << c.text;
  }
}

TEST(StructuralTagFormat, TagsWithSeparator) {
  const auto with = [](bool at_least_one, bool stop_after_first) {
    return FormatGrammar({{"type", "tags_with_separator"},
                          {"tags", {CallTag("a"), CallTag("b")}},
                          {"separator", ","},
                          {"at_least_one", at_least_one},
                          {"stop_after_first", stop_after_first}});
  };
  const std::string a = "<f=a>{\"x\": 1}</f>", b = "<f=b>{\"x\": 2}</f>";
  const Grammar any = with(false, false), some = with(true, false), one = with(true, true), maybe = with(false, true);
  EXPECT_TRUE(Matches(any, ""));
  EXPECT_TRUE(Matches(any, a + "," + b + "," + a));
  EXPECT_FALSE(Matches(any, a + b));         // the separator is required
  EXPECT_FALSE(Matches(any, a + ", " + b));  // and nothing else
  EXPECT_FALSE(Matches(some, ""));
  EXPECT_TRUE(Matches(some, b));
  EXPECT_TRUE(Matches(one, a));
  EXPECT_FALSE(Matches(one, a + "," + b));
  EXPECT_TRUE(Matches(maybe, ""));
  EXPECT_FALSE(Matches(maybe, a + "," + a));
}

TEST(StructuralTagFormat, BadFormatsAreRefusedNamingThePlace) {
  const std::vector<std::pair<ojson, const char*>> cases = {
      {{{"type", "qwen_xml_parameter"}, {"json_schema", kObjectX}},
       "'format.type' 'qwen_xml_parameter' is not supported"},
      {{{"value", "x"}}, "'format' must be a format"},
      {{{"type", "sequence"}, {"elements", ojson::array()}}, "'format.elements' must be a non-empty list"},
      {{{"type", "sequence"}, {"elements", {{{"type", "const_string"}}}}},
       "'format.elements[0].value' must be a string"},
      {{{"type", "triggered_tags"}, {"triggers", {"<f", "<f="}}, {"tags", {CallTag("a")}}},
       "'format.tags[0].begin' '<f=a>' starts with 2 of the triggers"},
      {{{"type", "triggered_tags"}, {"triggers", {"<f=", "<g"}}, {"tags", {CallTag("a")}}},
       "'format.triggers[1]' '<g' starts no tag's begin"},
      {{{"type", "triggered_tags"}, {"triggers", {"<f="}}, {"tags", {CallTag("a")}}, {"at_least_one", "yes"}},
       "'format.at_least_one' must be true or false"},
      {{{"type", "json_schema"}, {"json_schema", kObjectX}, {"style", "qwen_xml"}}, "'format.style' is not supported"},
      {{{"type", "regex"}, {"pattern", "(a"}}, "'format.pattern'"},
      {{{"type", "tag"}, {"begin", "<a>"}, {"end", "</a>"}}, "'format.content' is required"},
  };
  for (const auto& [format, named] : cases) {
    OutputConstraint c;
    c.kind = OutputConstraint::Kind::kStructuralTag;
    c.text = ojson{{"format", format}}.dump();
    auto g = BuildGrammar(c);
    ASSERT_FALSE(g.ok()) << format.dump();
    EXPECT_NE(std::string(g.status().message()).find(named), std::string::npos) << g.status().message();
  }
  // Formats nested deeper than the bound are refused, not followed down the stack.
  ojson deep = {{"type", "const_string"}, {"value", "x"}};
  for (int i = 0; i < 40; ++i) deep = {{"type", "sequence"}, {"elements", {deep}}};
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kStructuralTag;
  c.text = ojson{{"format", deep}}.dump();
  auto g = BuildGrammar(c);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(std::string(g.status().message()).find("nests formats more than 32 deep"), std::string::npos);
}

TEST(StructuralTag, RoundTripsThroughItsJson) {
  auto tag = StructuralTag::Parse(Tag());
  ASSERT_TRUE(tag.ok()) << tag.status();
  auto again = StructuralTag::Parse(tag->ToJson());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ToJson(), tag->ToJson());
  ASSERT_EQ(again->structures.size(), 2u);
  EXPECT_EQ(again->structures[1].begin, "<f=b>");
  EXPECT_EQ(again->structures[0].schema, kObjectX);
}

TEST(StructuralTag, BadTagsAreRefusedNamingTheField) {
  struct Case {
    ojson tag;
    const char* named;
  };
  ojson no_trigger = Tag();
  no_trigger["triggers"] = {"<g="};
  ojson extra_trigger = Tag();
  extra_trigger["triggers"].push_back("<h");
  ojson bad_schema = Tag();
  bad_schema["structures"][1]["schema"] = 5;
  ojson text_schema = Tag();
  text_schema["structures"][0]["schema"] = "{not json";
  ojson huge = Tag();
  huge["triggers"] = {"<f=" + std::string(5000, 'x')};
  huge["structures"][0]["begin"] = huge["triggers"][0];
  huge["structures"].erase(1);
  ojson no_begin = Tag();
  no_begin["structures"][0].erase("begin");
  const std::vector<Case> cases = {
      {ojson::array(), "'structural_tag' must be an object with 'format', or 'structures' and 'triggers'"},
      {{{"triggers", {"a"}}}, "'structures' must be a non-empty list"},
      {{{"structures", ojson::array()}, {"triggers", {"a"}}}, "'structures' must be a non-empty list"},
      {no_trigger, "'structures[0].begin' '<f=a>' starts with none of the triggers"},
      {extra_trigger, "'triggers[1]' '<h' starts no structure's begin"},
      {bad_schema, "'structures[1].schema' must be a JSON schema"},
      {text_schema, "'structures[0].schema' is not valid JSON"},
      {no_begin, "'structures[0].begin' must be a string"},
      {huge, "'triggers' hold 5003 bytes in all; at most 4096"},
      {{{"structures", Tag()["structures"]}, {"triggers", {"<f="}}, {"at_least_one", true}},
       "'at_least_one' is not a field of a structural tag (format; or structures and triggers)"},
      {{{"format", {{"type", "const_string"}, {"value", "x"}}}, {"triggers", {"a"}}},
       "'triggers' is not a field of a structural tag with a 'format'"},
  };
  for (const Case& c : cases) {
    auto tag = StructuralTag::Parse(c.tag);
    ASSERT_FALSE(tag.ok()) << c.tag.dump();
    EXPECT_NE(std::string(tag.status().message()).find(c.named), std::string::npos)
        << c.tag.dump() << ": " << tag.status().message();
  }
  // A begin that two triggers start is refused when the grammar is built, named as a structure.
  ojson two_triggers = Tag();
  two_triggers["triggers"] = {"<f", "<f="};
  OutputConstraint twice;
  twice.kind = OutputConstraint::Kind::kStructuralTag;
  twice.text = StructuralTag::Parse(two_triggers)->ToJson().dump();
  auto refused = BuildGrammar(twice);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.status().message()).find("'structures[0].begin' '<f=a>' starts with 2 of the triggers"),
            std::string::npos)
      << refused.status();
  // A schema the JSON-schema compiler refuses is named with its structure.
  ojson unsupported = Tag();
  unsupported["structures"][0]["schema"] = {{"type", "object"}, {"patternProperties", {{"^a", {{"type", "string"}}}}}};
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kStructuralTag;
  c.text = StructuralTag::Parse(unsupported)->ToJson().dump();
  auto g = BuildGrammar(c);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(std::string(g.status().message()).find("'structures[0].schema' JSON schema"), std::string::npos)
      << g.status();
}

}  // namespace
}  // namespace ls::structured
