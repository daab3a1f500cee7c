// Any model output parses or falls back cleanly: random streams built from the formats' markers,
// JSON fragments, whitespace and the tiny model's own tokens, cut into random pieces. Whatever
// the stream, the parsers neither crash nor lose text: every call has a name and a JSON object
// for arguments, the reply does not depend on how the stream was cut, it stays valid UTF-8, and
// without a readable call the content is the output exactly.
#include <gtest/gtest.h>

#include <random>

#include "chat/think_tag_parser.h"
#include "chat/tool_call_format.h"
#include "nlohmann/json.hpp"
#include "tests/chat/parser_test_util.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/utf8.h"

namespace ls::chat {
namespace {

std::unique_ptr<tok::Tokenizer> TinyTokenizer() {
  auto t = tok::LoadTokenizerJsonFile(std::string(LS_TEST_DATA_DIR) + "/../../models/tiny/tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

// Pieces of a random output: fragments of the formats and the tiny model's decoded tokens.
std::vector<std::string> RandomOutput(const ToolCallFormat& f, const tok::Tokenizer& tiny, std::mt19937* rng) {
  std::vector<std::string> fragments = {"<think>",
                                        "</think>",
                                        "{",
                                        "}",
                                        "\"name\": \"get_weather\"",
                                        ", ",
                                        "\"arguments\": ",
                                        "{\"city\": \"Paris\"}",
                                        "\"",
                                        ":",
                                        "[1, 2]",
                                        "\n",
                                        "  ",
                                        "functions.search:0",
                                        "function",
                                        "\n```json\n",
                                        "\n```",
                                        "é",
                                        "北京",
                                        "🌤",
                                        "<",
                                        "|",
                                        ">",
                                        "<tool",
                                        "_call>"};
  for (const std::string& m : f.markers()) {
    fragments.push_back(m);
    fragments.push_back(m.substr(0, m.size() / 2));  // half a marker
  }
  // A whole well-formed call of the format, which the fragments around it may break or leave alone.
  if (f.name == "hermes") {
    fragments.push_back("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  } else if (f.name == "glm45") {
    fragments.push_back("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>");
    for (const char* tag : {"<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"}) fragments.push_back(tag);
  } else {
    fragments.push_back(
        f.syntax.section_begin + f.syntax.call_begin +
        f.forced_call_prefix("", 0).substr(f.syntax.section_begin.size() + f.syntax.call_begin.size()) +
        (f.name == "kimi_k2" ? "search:0<|tool_call_argument_begin|>{\"q\": 1}" : "search\n```json\n{\"q\": 1}\n```") +
        f.syntax.call_end + f.syntax.section_end);
  }
  fragments.push_back("<｜tool▁sep｜>");
  fragments.push_back("<|tool_call_argument_begin|>");
  std::vector<std::string> out;
  auto stream = tiny.NewDecodeStream(false);
  const int n = std::uniform_int_distribution<int>(0, 40)(*rng);
  for (int i = 0; i < n; ++i) {
    if (std::uniform_int_distribution<int>(0, 2)(*rng) == 0) {
      const int32_t id = std::uniform_int_distribution<int32_t>(3, tiny.vocab_size() - 1)(*rng);
      auto piece = stream->Push(id);
      if (piece.ok()) out.push_back(*piece);
    } else {
      out.push_back(fragments[std::uniform_int_distribution<size_t>(0, fragments.size() - 1)(*rng)]);
    }
  }
  out.push_back(stream->Finish());
  return out;
}

std::string Join(const std::vector<std::string>& pieces) {
  std::string s;
  for (const auto& p : pieces) s += p;
  return s;
}

void ExpectSameReply(const Reply& a, const Reply& b, const std::string& what) {
  EXPECT_EQ(a.delta.content, b.delta.content) << what;
  EXPECT_EQ(a.delta.reasoning, b.delta.reasoning) << what;
  ASSERT_EQ(a.delta.tool_calls.size(), b.delta.tool_calls.size()) << what;
  for (size_t i = 0; i < a.delta.tool_calls.size(); ++i) {
    EXPECT_EQ(a.delta.tool_calls[i].name, b.delta.tool_calls[i].name) << what;
    EXPECT_EQ(a.delta.tool_calls[i].arguments, b.delta.tool_calls[i].arguments) << what;
    EXPECT_EQ(a.delta.tool_calls[i].id, b.delta.tool_calls[i].id) << what;
  }
}

TEST(RandomOutputTest, AnyOutputParsesOrFallsBackCleanly) {
  auto tiny = TinyTokenizer();
  ASSERT_NE(tiny, nullptr);
  std::mt19937 rng(20260721);
  int calls = 0, fallbacks = 0;
  for (int round = 0; round < 1500; ++round) {
    for (const ToolCallFormat* f :
         {&HermesToolCallFormat(), &DeepSeekV3ToolCallFormat(), &KimiK2ToolCallFormat(), &Glm45ToolCallFormat()}) {
      const std::vector<std::string> pieces = RandomOutput(*f, *tiny, &rng);
      const std::string text = Join(pieces);
      const bool think = round % 2 == 1;
      auto make = [&] {
        std::unique_ptr<ChatOutputParser> p = f->NewParser(CountingIds());
        if (think) p = std::make_unique<ThinkTagParser>(std::move(p), round % 4 == 1);
        return p;
      };
      const std::string what = f->name + (think ? "+think" : "") + ": " + text;
      const Reply as_generated = Parse(make(), pieces);
      ExpectSameReply(as_generated, Parse(make(), {text}), what + " (whole)");
      ExpectSameReply(as_generated, Parse(make(), Bytes(text)), what + " (bytes)");
      ExpectSameReply(as_generated, Parse(make(), RandomPieces(text, &rng)), what + " (random pieces)");
      for (const ToolCallDelta& c : as_generated.delta.tool_calls) {
        EXPECT_TRUE(IsCallName(c.name)) << what;
        const auto args = nlohmann::json::parse(c.arguments, nullptr, false);
        EXPECT_TRUE(args.is_object()) << what << ": " << c.arguments;
      }
      for (const std::string* s : {&as_generated.delta.content, &as_generated.delta.reasoning})
        EXPECT_EQ(tok::FindInvalidUtf8(*s), std::string::npos) << what;
      if (!think && as_generated.delta.tool_calls.empty()) {
        EXPECT_EQ(as_generated.delta.content, text) << "no call read: the output comes back as written";
      }
      calls += static_cast<int>(as_generated.delta.tool_calls.size());
      fallbacks += !as_generated.warning.empty();
    }
  }
  // The streams exercise both paths.
  EXPECT_GT(calls, 10);
  EXPECT_GT(fallbacks, 100);
}

}  // namespace
}  // namespace ls::chat
