// JSON schemas: for each schema, hand-written instances that validate are whole matches and ones
// that do not are refused, byte by byte; unsupported keywords are errors naming them and where.
#include "structured/json_schema.h"

#include <gtest/gtest.h>

#include "tests/structured/match_util.h"

namespace ls::structured {
namespace {

struct SchemaCase {
  const char* schema;
  std::vector<std::string> valid, invalid;
};

void Check(const std::vector<SchemaCase>& cases) {
  for (const SchemaCase& c : cases) {
    auto g = JsonSchemaGrammar(nlohmann::ordered_json::parse(c.schema));
    ASSERT_TRUE(g.ok()) << c.schema << ": " << g.status();
    for (const auto& v : c.valid) EXPECT_TRUE(Matches(*g, v)) << c.schema << "\n  should accept " << v;
    for (const auto& v : c.invalid) EXPECT_FALSE(Matches(*g, v)) << c.schema << "\n  should refuse " << v;
  }
}

TEST(JsonSchema, ScalarTypes) {
  Check({
      {R"({"type":"string"})", {R"("")", R"("a b")", R"("\"\\\/\b\f\n\r\t")", R"("\u00e9")", "\"\xC3\xA9\""},
       {R"(a)", R"("a)", "\"a\nb\"", R"("\x")", R"("\u12")", "\"\x01\""}},
      {R"({"type":"integer"})", {"0", "-7", "12345678901234"}, {"01", "-0x", "1.5", "1e3", "+1", "-"}},
      {R"({"type":"number"})", {"0", "-1.5", "2e10", "3.25E-2", "0.0"}, {".5", "1.", "01", "1e", "--1"}},
      {R"({"type":"boolean"})", {"true", "false"}, {"True", "1"}},
      {R"({"type":"null"})", {"null"}, {"nil", ""}},
      {R"({"type":["string","null"]})", {"null", R"("x")"}, {"1"}},
      {R"({})", {"1", R"({"a":[true,null]})", R"("s")"}, {"", "{"}},
      {R"(true)", {"[]", "-2"}, {"nope"}},
  });
}

TEST(JsonSchema, IntegerAndNumberBounds) {
  Check({
      {R"({"type":"integer","minimum":-5,"maximum":12})", {"-5", "0", "9", "10", "12"}, {"-6", "13", "100", "-10"}},
      {R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":100})", {"1", "99"}, {"0", "100", "-1"}},
      {R"({"type":"integer","minimum":1000})", {"1000", "99999", "123456789"}, {"999", "0", "-1000"}},
      {R"({"type":"integer","maximum":-10})", {"-10", "-11", "-1000"}, {"-9", "0", "5"}},
      {R"({"type":"integer","minimum":37,"maximum":412})", {"37", "99", "100", "399", "412"},
       {"36", "413", "500", "3", "0412"}},
      {R"({"type":"number","minimum":0,"maximum":10})", {"0", "10", "9.75", "3"}, {"-1", "11", "10.5", "-0.5"}},
  });
}

TEST(JsonSchema, StringsWithLengthsPatternsAndFormats) {
  Check({
      {R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", R"("abc")", R"("\n\t")", "\"\xC3\xA9\xC3\xA9\""},
       {R"("a")", R"("abcd")"}},
      {R"({"type":"string","pattern":"^[A-Z]{2}-\\d+$"})", {R"("AB-12")"}, {R"("ab-12")", R"("AB-")"}},
      {R"({"type":"string","format":"date"})", {R"("2024-02-29")", R"("1999-12-31")", R"("2024-04-30")"},
       {R"("2024-13-01")", R"("2024-1-01")", R"("24-01-01")", R"("2024-01-32")", R"("2024-11-31")", R"("2024-02-30")"}},
      {R"({"type":"string","format":"time"})", {R"("23:59:59Z")", R"("00:00:00Z")", R"("12:30:00.5+02:00")"},
       {R"("24:00:00Z")", R"("12:60:00Z")", R"("12:00:00")"}},
      {R"({"type":"string","format":"date-time"})", {R"("2024-05-06T07:08:09Z")", R"("2024-05-06T07:08:09.123-05:30")"},
       {R"("2024-05-06 07:08:09Z")", R"("2024-05-06T07:08Z")"}},
      {R"({"type":"string","format":"email"})", {R"("a.b+c@example.co")", R"("x@y.zz")"},
       {R"("a@")", R"("@b.c")", R"("a b@c.d")", R"("a..b@c.de")", R"(".a@c.de")"}},
      {R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400")"}},
      {R"({"type":"string","format":"ipv4"})", {R"("192.168.0.1")", R"("255.255.255.255")", R"("0.0.0.0")"},
       {R"("256.1.1.1")", R"("1.2.3")", R"("01.2.3.4")"}},
  });
}

TEST(JsonSchema, EnumsConstsAndUnions) {
  Check({
      {R"({"enum":["red","green",3,null,{"a":[1]}]})", {R"("red")", "3", "null", R"({"a":[1]})"},
       {R"("blue")", "4", R"({"a":[2]})"}},
      {R"({"const":"fixed"})", {R"("fixed")"}, {R"("other")"}},
      {R"({"anyOf":[{"type":"integer","maximum":3},{"type":"string","maxLength":1}]})", {"2", R"("x")"},
       {"4", R"("xy")"}},
      {R"({"oneOf":[{"type":"boolean"},{"type":"null"}]})", {"true", "null"}, {"0"}},
  });
}

TEST(JsonSchema, ObjectsInTheirOrderWithOptionalAndExtraProperties) {
  Check({
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]})",
       {R"({"a":1})", R"({"a":1,"b":"x"})", "{ \"a\" : 1 , \"b\" : \"x\" }", "{\n  \"a\": 1,\n  \"b\": \"x\"\n}"},
       {R"({})", R"({"b":"x"})", R"({"a":1,"c":2})", R"({"a":"1"})", R"({"a":1,})", R"({"b":"x","a":1})"}},
      // The schema's order, not the alphabet's.
      {R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},"required":["zeta","alpha"]})",
       {R"({"zeta":1,"alpha":2})"}, {R"({"alpha":2,"zeta":1})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false})",
       {R"({})", R"({"a":5})"}, {R"({"z":1})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"ab":{"type":"null"}},"additionalProperties":{"type":"boolean"}})",
       {R"({"a":1,"x":true})", R"({"y":false})", R"({"abc":true})", R"({"b":false,"\u0061":true})", R"({"":true})"},
       {R"({"x":1})", R"({"a":1,"a":true})", R"({"ab":true})", R"({"a":true})"}},
      {R"({"type":"object"})", {R"({})", R"({"k":[1,{"z":null}]})"}, {R"([])", R"({"k"})"}},
      {R"({"type":"object","properties":{"o":{"type":"object","properties":{"p":{"type":"null"}},"required":["p"]}},
          "required":["o"]})",
       {R"({"o":{"p":null}})"}, {R"({"o":{}})"}},
  });
}

TEST(JsonSchema, WhitespaceIsBounded) {
  auto g = JsonSchemaGrammar(nlohmann::ordered_json::parse(R"({"type":"array","items":{"type":"integer"}})"));
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(Matches(*g, "[\n" + std::string(32, ' ') + "1]"));
  EXPECT_FALSE(IsPrefix(*g, "[\n" + std::string(33, ' ')));
  EXPECT_FALSE(IsPrefix(*g, "[  "));
  EXPECT_FALSE(IsPrefix(*g, "[\n\n"));
  EXPECT_FALSE(IsPrefix(*g, "[1  "));
  EXPECT_FALSE(IsPrefix(*g, "[1 , \n\n"));
  EXPECT_TRUE(Matches(*g, "[ 1 , 2 ]"));
  EXPECT_TRUE(Matches(*g, "[\n  1,\n  2\n]"));
}

TEST(JsonSchema, ArraysWithItemsPrefixItemsAndCounts) {
  Check({
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})", {"[1]", "[1,2,3]", "[ 1 , 2 ]"},
       {"[]", "[1,2,3,4]", "[1,]", R"(["a"])"}},
      {R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})", {R"(["a",1])", R"(["a"])", "[]"},
       {R"(["a",1,2])", R"([1,"a"])"}},
      {R"({"type":"array","prefixItems":[{"type":"boolean"}],"items":{"type":"null"}})", {"[true,null,null]"},
       {"[true,false]"}},
      {R"({"type":"array"})", {"[]", R"([1,"a",{"b":[]}])"}, {"[1"}},
  });
}

TEST(JsonSchema, ReferencesIncludingRecursiveOnes) {
  Check({
      {R"({"$defs":{"pos":{"type":"integer","minimum":1}},"type":"object","properties":{"n":{"$ref":"#/$defs/pos"}},
          "required":["n"]})",
       {R"({"n":3})"}, {R"({"n":0})"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
            "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},"$ref":"#/$defs/node"})",
       {R"({"v":1})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]})"}, {R"({"v":1,"kids":[{}]})"}},
      {R"({"definitions":{"list":{"anyOf":[{"type":"null"},{"type":"object","properties":{"next":{"$ref":"#/definitions/list"}},
            "required":["next"],"additionalProperties":false}]}},"$ref":"#/definitions/list"})",
       {"null", R"({"next":{"next":null}})"}, {R"({"next":1})"}},
      {R"({"type":"object","properties":{"self":{"$ref":"#"}},"additionalProperties":false})",
       {R"({})", R"({"self":{"self":{}}})"}, {R"({"self":1})"}},
  });
}

TEST(JsonSchema, UnsupportedKeywordsAreErrorsNamingThemAndWhere) {
  const std::vector<std::pair<const char*, const char*>> bad = {
      {R"({"type":"string","contentMediaType":"x"})", "'contentMediaType'"},
      {R"({"type":"object","properties":{"a":{"not":{}}}})", "at /properties/a"},
      {R"({"type":"object","patternProperties":{"^x":{}}})", "'patternProperties'"},
      {R"({"$ref":"#/$defs/missing"})", "#/$defs/missing"},
      {R"({"type":"object","properties":{"a":{"$ref":"#/definitions/x"}}})", "#/definitions/x"},
      {R"({"$ref":"http://example.com/s.json"})", "http://example.com/s.json"},
      {R"({"type":"string","format":"hostname"})", "'hostname'"},
      {R"({"type":"frog"})", "'frog'"},
      {R"({"type":"string","pattern":"(a)\\1"})", "backreference"},
  };
  for (const auto& [schema, word] : bad) {
    auto g = JsonSchemaGrammar(nlohmann::ordered_json::parse(schema));
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_NE(g.status().message().find(word), std::string::npos) << schema << ": " << g.status();
  }
}

TEST(JsonSchema, JsonObjectIsAnyObject) {
  auto g = JsonObjectGrammar();
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(Matches(*g, R"({"a":{"b":[1,2.5,"x",null,true]}})"));
  EXPECT_TRUE(Matches(*g, "{}"));
  EXPECT_FALSE(Matches(*g, "[]"));
  EXPECT_FALSE(Matches(*g, "\"x\""));
}

}  // namespace
}  // namespace ls::structured
