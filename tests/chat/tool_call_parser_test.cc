// The tool-call parsers against goldens written by the formats' chat templates
// (tests/data/chat/tool_call_goldens.json, make_tool_call_goldens.py): whole, streamed a byte at a
// time and in random pieces, the reply is the calls the template wrote and the content beside
// them; malformed calls come back as the text they were, with a warning.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "chat/tool_call_format.h"
#include "nlohmann/json.hpp"
#include "tests/chat/parser_test_util.h"

namespace ls::chat {
namespace {

using ojson = nlohmann::ordered_json;

ojson ToolCallGoldens() {
  std::ifstream in(std::string(LS_TEST_DATA_DIR) + "/chat/tool_call_goldens.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ojson::parse(ss.str());
}

void CheckReply(const ojson& c, const Reply& r, const std::string& how) {
  const std::string where = c["format"].get<std::string>() + "/" + c["name"].get<std::string>() + " " + how;
  EXPECT_EQ(r.delta.content, c["content"].get<std::string>()) << where;
  EXPECT_EQ(r.delta.reasoning, "") << where;
  ASSERT_EQ(r.delta.tool_calls.size(), c["tool_calls"].size()) << where;
  for (size_t i = 0; i < r.delta.tool_calls.size(); ++i) {
    const ToolCallDelta& got = r.delta.tool_calls[i];
    const ojson& want = c["tool_calls"][i];
    EXPECT_EQ(got.index, static_cast<int32_t>(i)) << where;
    EXPECT_EQ(got.name, want["name"].get<std::string>()) << where;
    EXPECT_EQ(ojson::parse(got.arguments), want["arguments"]) << where << ": " << got.arguments;
    if (want.contains("id")) {
      EXPECT_EQ(got.id, want["id"].get<std::string>()) << where;
    } else {
      EXPECT_EQ(got.id, "call-" + std::to_string(i)) << where;
    }
  }
  EXPECT_EQ(!r.warning.empty(), c["malformed"].get<bool>()) << where << ": " << r.warning;
}

TEST(ToolCallParserTest, GoldensReadTheSameWholeByteByByteAndInRandomPieces) {
  const ojson cases = ToolCallGoldens();
  ASSERT_GE(cases.size(), 40u);
  std::mt19937 rng(7);
  for (const ojson& c : cases) {
    const ToolCallFormat* f = FindToolCallFormat(c["format"].get<std::string>());
    ASSERT_NE(f, nullptr);
    const std::string out = c["output"];
    CheckReply(c, Parse(f->NewParser(CountingIds()), {out}), "whole");
    CheckReply(c, Parse(f->NewParser(CountingIds()), Bytes(out)), "byte by byte");
    for (int k = 0; k < 5; ++k)
      CheckReply(c, Parse(f->NewParser(CountingIds()), RandomPieces(out, &rng)), "random pieces");
  }
}

TEST(ToolCallParserTest, ContentBeforeACallStreamsBeforeTheCallEnds) {
  auto p = HermesToolCallFormat().NewParser(CountingIds());
  ChatDelta d = p->Feed(5, "Checking the weather");
  EXPECT_EQ(d.content, "Checking the weather");
  d = p->Feed(6, " now.\n<tool_");
  EXPECT_EQ(d.content, " now.") << "the space before a possible call is held";
  d = p->Feed(7, "call>\n{\"name\": \"get_weather\", ");
  EXPECT_TRUE(d.empty()) << "nothing of a call goes out before it is complete";
  d = p->Feed(8, "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].id, "call-0");
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(d.content, "") << "the newline before the call is dropped";
  EXPECT_TRUE(p->Finish().empty());
  EXPECT_EQ(p->warning(), "");
}

TEST(ToolCallParserTest, TextWithoutCallsComesBackExactly) {
  for (const std::string text : {"Plain answer.  ", "a < b and <tool and </tool_call> too", "\n\n", "<tool_call",
                                 "x <|tool_calls_section_begin", "ends with <"}) {
    for (const ToolCallFormat* f :
         {&HermesToolCallFormat(), &DeepSeekV3ToolCallFormat(), &KimiK2ToolCallFormat(), &Glm45ToolCallFormat()}) {
      const Reply whole = Parse(f->NewParser(CountingIds()), {text});
      const Reply bytes = Parse(f->NewParser(CountingIds()), Bytes(text));
      EXPECT_TRUE(whole.delta.tool_calls.empty());
      EXPECT_EQ(bytes.delta.content, whole.delta.content) << f->name;
      // An unclosed opening is the only way such text warns, and it still comes back whole.
      EXPECT_EQ(whole.delta.content, text) << f->name;
    }
  }
}

TEST(ToolCallParserTest, SkippedMarkerTokensAreFoundByTheirIds) {
  // A decoder that skips special tokens gives DeepSeek's marker tokens no text; their ids still
  // mark the call.
  const FakeVocab vocab({{"<｜tool▁calls▁begin｜>", 100},
                         {"<｜tool▁call▁begin｜>", 101},
                         {"<｜tool▁sep｜>", 102},
                         {"<｜tool▁call▁end｜>", 103},
                         {"<｜tool▁calls▁end｜>", 104}});
  const ToolCallFormat& f = DeepSeekV3ToolCallFormat();
  ToolParserOptions o = CountingIds();
  o.marker_tokens = MarkerTokens(&vocab, f.markers());
  auto p = f.NewParser(o);
  ChatDelta d;
  d.Append(p->Feed(9, "Sure."));
  d.Append(p->Feed(100, ""));
  d.Append(p->Feed(101, ""));
  d.Append(p->Feed(10, "function"));
  d.Append(p->Feed(102, "<｜tool▁sep｜>"));  // not skipped: its text is used as is
  d.Append(p->Feed(11, "get_weather\n```json\n{\"city\": \"Rome\"}\n```"));
  d.Append(p->Feed(103, ""));
  d.Append(p->Feed(104, ""));
  d.Append(p->Finish());
  EXPECT_EQ(d.content, "Sure.");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"Rome"})");
}

TEST(ToolCallParserTest, ForcedPrefixesOpenACallTheParserCompletes) {
  struct Case {
    const ToolCallFormat* format;
    std::string rest;  // what the model writes after the prefix
  };
  const Case cases[] = {
      {&HermesToolCallFormat(), "{\"city\": \"Lima\"}}\n</tool_call>"},
      {&DeepSeekV3ToolCallFormat(), "{\"city\": \"Lima\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {&KimiK2ToolCallFormat(), "{\"city\": \"Lima\"}<|tool_call_end|><|tool_calls_section_end|>"},
      {&Glm45ToolCallFormat(), "<arg_key>city</arg_key>\n<arg_value>Lima</arg_value>\n</tool_call>"},
  };
  for (const Case& c : cases) {
    auto p = c.format->NewParser(CountingIds());
    EXPECT_TRUE(p->Feed(-1, c.format->forced_call_prefix("get_weather", 2)).empty()) << c.format->name;
    ChatDelta d = p->Feed(1, c.rest);
    d.Append(p->Finish());
    ASSERT_EQ(d.tool_calls.size(), 1u) << c.format->name;
    EXPECT_EQ(d.tool_calls[0].name, "get_weather");
    EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"Lima"})");
    EXPECT_EQ(d.content, "");
  }
  EXPECT_EQ(KimiK2ToolCallFormat().forced_call_prefix("f", 2),
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:2<|tool_call_argument_begin|>");
  EXPECT_EQ(HermesToolCallFormat().forced_call_prefix("", 0), "<tool_call>\n{\"name\": \"");
  EXPECT_EQ(HermesToolCallFormat().forced_call_prefix("a\"b", 0),
            "<tool_call>\n{\"name\": \"a\\\"b\", \"arguments\": ");
}

// GLM-4.5 keeps a bare argument value as the model wrote it: bytes that are not UTF-8 (which the
// detokenizer never passes, but a parser must survive) become U+FFFD instead of throwing.
TEST(ToolCallParserTest, GlmValuesThatAreNotUtf8StillGiveJsonArguments) {
  auto p = Glm45ToolCallFormat().NewParser(CountingIds());
  ChatDelta d = p->Feed(1,
                        "<tool_call>f\n<arg_key>k\xbe</arg_key>\n<arg_value>a\xff"
                        "b</arg_value>\n</tool_call>");
  d.Append(p->Finish());
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments,
            "{\"k\xEF\xBF\xBD\":\"a\xEF\xBF\xBD"
            "b\"}");
  EXPECT_EQ(d.content, "");
}

TEST(ToolCallParserTest, FormatsAreFoundByName) {
  EXPECT_EQ(FindToolCallFormat("qwen"), &HermesToolCallFormat());
  EXPECT_EQ(FindToolCallFormat("glm45"), &Glm45ToolCallFormat());
  EXPECT_EQ(FindToolCallFormat("nope"), nullptr);
}

}  // namespace
}  // namespace ls::chat
