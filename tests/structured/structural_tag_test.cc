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
      {ojson::array(), "'structural_tag' must be an object"},
      {{{"triggers", {"a"}}}, "'structures' must be a non-empty list"},
      {{{"structures", ojson::array()}, {"triggers", {"a"}}}, "'structures' must be a non-empty list"},
      {no_trigger, "'structures[0].begin' '<f=a>' starts with none of the triggers"},
      {extra_trigger, "'triggers[1]' '<h' starts no structure's begin"},
      {bad_schema, "'structures[1].schema' must be a JSON schema"},
      {text_schema, "'structures[0].schema' is not valid JSON"},
      {no_begin, "'structures[0].begin' must be a string"},
      {huge, "'triggers' hold 5003 bytes in all; at most 4096"},
      {{{"format", {{"type", "triggered_tags"}}}}, "'format' (the newer structural-tag form) is not supported yet"},
      {{{"structures", Tag()["structures"]}, {"triggers", {"<f="}}, {"at_least_one", true}},
       "'at_least_one' is not a field of a structural tag"},
  };
  for (const Case& c : cases) {
    auto tag = StructuralTag::Parse(c.tag);
    ASSERT_FALSE(tag.ok()) << c.tag.dump();
    EXPECT_NE(std::string(tag.status().message()).find(c.named), std::string::npos)
        << c.tag.dump() << ": " << tag.status().message();
  }
  // A schema the JSON-schema compiler refuses is named with its structure.
  ojson unsupported = Tag();
  unsupported["structures"][0]["schema"] = {{"type", "object"}, {"patternProperties", {{"^a", {{"type", "string"}}}}}};
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kStructuralTag;
  c.text = StructuralTag::Parse(unsupported)->ToJson().dump();
  auto g = BuildGrammar(c);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(std::string(g.status().message()).find("structures[0].schema"), std::string::npos) << g.status();
}

}  // namespace
}  // namespace ls::structured
