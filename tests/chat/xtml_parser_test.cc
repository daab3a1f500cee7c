// Reading Kimi K3's generated XTML back: render -> ids -> parse round trips over multi-turn
// conversations with tools, a streamed answer split into OpenAI deltas one token at a time, and
// malformed output falling back to content with a warning.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "tests/chat/xtml_test_util.h"
#include "tokenizer/utf8.h"

namespace ls::chat {
namespace {

using testing::Encode;
using testing::K3Chat;
using testing::ojson;
using testing::Parse;
using testing::Parsed;
using testing::Request;

// A prompt and the ids a model would generate after it: the rendered conversation with the
// assistant message appended, minus the prompt (which must be its prefix).
struct Turn {
  chat::ChatRequestInputs prompt;
  std::vector<int32_t> generated;
};

Turn AssistantTurn(const ojson& history, const ojson& assistant, const ojson& kwargs = ojson::object(),
                   const ojson& tools = nullptr) {
  Turn t;
  t.prompt = Request(history, kwargs, true);
  t.prompt.tools = tools;
  ojson all = history;
  all.push_back(assistant);
  chat::ChatRequestInputs full = Request(all, kwargs, false);
  full.tools = tools;
  auto p = K3Chat().Render(t.prompt);
  auto f = K3Chat().Render(full);
  EXPECT_TRUE(p.ok() && f.ok()) << p.status() << f.status();
  if (!p.ok() || !f.ok()) return t;
  EXPECT_TRUE(f->size() > p->size() && std::equal(p->begin(), p->end(), f->begin()))
      << "the generation prompt is not a prefix of the rendered assistant message";
  t.generated.assign(f->begin() + std::min(p->size(), f->size()), f->end());
  return t;
}

ojson Call(const std::string& id, const std::string& name, const ojson& args) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args.dump()}}}};
}

// The tool calls of a merged delta as OpenAI JSON ({name, arguments parsed}).
ojson Calls(const ChatDelta& d) {
  ojson out = ojson::array();
  for (const ToolCallDelta& c : d.tool_calls) {
    ojson args = ojson::parse(c.arguments, nullptr, false);
    EXPECT_FALSE(args.is_discarded()) << "arguments are not JSON: " << c.arguments;
    out.push_back({{"name", c.name}, {"arguments", args}});
  }
  return out;
}

ojson ExpectedCalls(const ojson& assistant) {
  ojson out = ojson::array();
  for (const ojson& c : assistant["tool_calls"])
    out.push_back(
        {{"name", c["function"]["name"]}, {"arguments", ojson::parse(c["function"]["arguments"].get<std::string>())}});
  return out;
}

const ojson kUser = {{"role", "user"}, {"content", "Weather in Paris, and any news?"}};

ojson TwoCallAnswer() {
  return {{"role", "assistant"},
          {"reasoning_content", "Two lookups: weather, then news.\nBoth are independent."},
          {"content", "Checking both — un moment, s'il vous plaît."},
          {"tool_calls", ojson::array({Call("call_1", "get_weather", {{"city", "Paris"}, {"days", 3}}),
                                       Call("call_2", "search",
                                            {{"q", "news \"today\" <|open|>call<|sep|> \\ end"},
                                             {"opts", {{"n", 2}, {"tags", {"a", "b"}}}},
                                             {"safe", true},
                                             {"limit", nullptr},
                                             {"ratio", 0.25},
                                             {"empty", ""}})})}};
}

TEST(XtmlParser, RoundTripRecoversReasoningContentAndTwoToolCalls) {
  const ojson answer = TwoCallAnswer();
  Turn t = AssistantTurn(ojson::array({kUser}), answer);
  ASSERT_FALSE(t.generated.empty());
  EXPECT_EQ(t.generated.back(), K3Chat().end_of_msg_id());
  Parsed p = Parse(t.prompt, t.generated);
  EXPECT_EQ(p.warning, "");
  EXPECT_EQ(p.all.reasoning, answer["reasoning_content"]);
  EXPECT_EQ(p.all.content, answer["content"]);
  EXPECT_EQ(Calls(p.all), ExpectedCalls(answer));
  ASSERT_EQ(p.all.tool_calls.size(), 2u);
  const std::regex id_shape("call_[0-9A-Za-z]{24}");
  EXPECT_TRUE(std::regex_match(p.all.tool_calls[0].id, id_shape)) << p.all.tool_calls[0].id;
  EXPECT_NE(p.all.tool_calls[0].id, p.all.tool_calls[1].id);
  EXPECT_EQ(p.all.tool_calls[0].index, 0);
  EXPECT_EQ(p.all.tool_calls[1].index, 1);
}

TEST(XtmlParser, RoundTripsEveryAssistantTurnOfAMultiTurnConversationWithToolResults) {
  const ojson tools = ojson::array({{{"type", "function"}, {"function", {{"name", "get_weather"}}}},
                                    {{"type", "function"}, {"function", {{"name", "search"}}}}});
  const ojson first = TwoCallAnswer();
  const ojson second = {{"role", "assistant"},
                        {"reasoning_content", "Results are in."},
                        {"content", "Sunny, 21°C; nothing new."},
                        {"tool_calls", ojson::array({Call("call_3", "get_weather", {{"city", "Lyon"}})})}};
  const ojson third = {{"role", "assistant"}, {"reasoning_content", ""}, {"content", "Lyon: rain."}};
  ojson history = ojson::array({{{"role", "system"}, {"content", "Be brief."}}, kUser});
  for (const ojson& kwargs : {ojson::object(), ojson{{"thinking", false}}}) {
    SCOPED_TRACE(kwargs.dump());
    ojson h = history;
    for (const ojson& answer : {first, second, third}) {
      Turn t = AssistantTurn(h, answer, kwargs, tools);
      Parsed p = Parse(t.prompt, t.generated);
      EXPECT_EQ(p.warning, "");
      EXPECT_EQ(p.all.reasoning, kwargs.empty() ? answer["reasoning_content"].get<std::string>() : "");
      EXPECT_EQ(p.all.content, answer["content"]);
      EXPECT_EQ(Calls(p.all), answer.contains("tool_calls") ? ExpectedCalls(answer) : ojson::array());
      h.push_back(answer);
      if (answer.contains("tool_calls")) {
        // Results out of order: the renderer puts them back in the calls' order.
        for (auto it = answer["tool_calls"].rbegin(); it != answer["tool_calls"].rend(); ++it)
          h.push_back({{"role", "tool"},
                       {"tool_call_id", (*it)["id"]},
                       {"content", "result of " + (*it)["id"].get<std::string>()}});
      } else {
        h.push_back({{"role", "user"}, {"content", "And tomorrow?"}});
      }
    }
  }
}

TEST(XtmlParser, StreamsThinkResponseAndTwoToolCallsAsOpenAIDeltas) {
  const ojson answer = TwoCallAnswer();
  Turn t = AssistantTurn(ojson::array({kUser}), answer);
  Parsed p = Parse(t.prompt, t.generated);
  ASSERT_EQ(p.deltas.size(), t.generated.size() + 1);

  std::string reasoning, content;
  int reasoning_pieces = 0, content_pieces = 0;
  int last_reasoning = -1, first_content = -1, last_content = -1, first_call = -1;
  std::map<int32_t, std::string> args;
  std::map<int32_t, std::pair<std::string, std::string>> head;  // index -> (id, name)
  std::vector<int32_t> order;
  for (size_t i = 0; i < p.deltas.size(); ++i) {
    const ChatDelta& d = p.deltas[i];
    for (const std::string* s : {&d.reasoning, &d.content}) EXPECT_EQ(tok::FindInvalidUtf8(*s), std::string::npos);
    if (!d.reasoning.empty()) {
      reasoning += d.reasoning;
      ++reasoning_pieces;
      last_reasoning = static_cast<int>(i);
    }
    if (!d.content.empty()) {
      content += d.content;
      ++content_pieces;
      if (first_content < 0) first_content = static_cast<int>(i);
      last_content = static_cast<int>(i);
    }
    for (const ToolCallDelta& c : d.tool_calls) {
      if (first_call < 0) first_call = static_cast<int>(i);
      if (!head.count(c.index)) {
        // The first delta of a call: its id and name, before any argument.
        EXPECT_FALSE(c.id.empty());
        EXPECT_FALSE(c.name.empty());
        head[c.index] = {c.id, c.name};
        order.push_back(c.index);
      } else {
        EXPECT_TRUE(c.id.empty());
        EXPECT_TRUE(c.name.empty());
      }
      args[c.index] += c.arguments;
    }
  }
  // Reasoning and content stream token by token, in that order, before the calls.
  EXPECT_EQ(reasoning, answer["reasoning_content"]);
  EXPECT_EQ(content, answer["content"]);
  EXPECT_GT(reasoning_pieces, 3);
  EXPECT_GT(content_pieces, 3);
  EXPECT_LT(last_reasoning, first_content);
  EXPECT_LT(last_content, first_call);
  EXPECT_EQ(order, (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(head.size(), 2u);
  EXPECT_EQ(head[0].second, "get_weather");
  EXPECT_EQ(head[1].second, "search");
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(ojson::parse(args[i]), ojson::parse(answer["tool_calls"][i]["function"]["arguments"].get<std::string>()));
  // The summed delta (ChatDelta::Append, as a non-streamed response uses) says the same.
  EXPECT_EQ(p.all.reasoning, reasoning);
  EXPECT_EQ(p.all.content, content);
  ASSERT_EQ(p.all.tool_calls.size(), 2u);
  EXPECT_EQ(p.all.tool_calls[1].arguments, args[1]);
}

TEST(XtmlParser, StartsWhereThePromptLeftTheModel) {
  const ojson msgs = ojson::array({kUser});
  const auto text = Encode("hello there");
  EXPECT_EQ(Parse(Request(msgs), text).all.reasoning, "hello there");
  EXPECT_EQ(Parse(Request(msgs, {{"thinking", false}}), text).all.content, "hello there");
  chat::ChatRequestInputs cont = Request(ojson::array({kUser, {{"role", "assistant"}, {"content", "So"}}}), {}, false);
  cont.continue_final_message = true;
  EXPECT_EQ(Parse(cont, text).all.content, "hello there");
  cont.messages.back() = {{"role", "assistant"}, {"reasoning_content", "Hmm"}};
  EXPECT_EQ(Parse(cont, text).all.reasoning, "hello there");
  // Without a generation prompt the model must open the message itself.
  Turn t = AssistantTurn(msgs, TwoCallAnswer());
  auto full = K3Chat().Render(Request(msgs, ojson::object(), false));
  ASSERT_TRUE(full.ok());
  auto prompt = K3Chat().Render(t.prompt);
  ASSERT_TRUE(prompt.ok());
  std::vector<int32_t> opened(prompt->begin() + full->size(), prompt->end());  // the generation prompt
  opened.insert(opened.end(), t.generated.begin(), t.generated.end());
  Parsed p = Parse(Request(msgs, ojson::object(), false), opened);
  EXPECT_EQ(p.warning, "");
  EXPECT_EQ(p.all.content, TwoCallAnswer()["content"]);
  EXPECT_EQ(p.all.tool_calls.size(), 2u);
}

// Builds generated ids by hand: T text, O open tag with header, C close tag, E end of message.
struct Ids {
  std::vector<int32_t> v;
  Ids& T(const std::string& text) {
    for (int32_t id : Encode(text)) v.push_back(id);
    return *this;
  }
  Ids& O(const std::string& header) {
    v.push_back(K3Chat().control_ids().open);
    T(header);
    v.push_back(K3Chat().control_ids().sep);
    return *this;
  }
  Ids& C(const std::string& name) {
    v.push_back(K3Chat().control_ids().close);
    T(name);
    v.push_back(K3Chat().control_ids().sep);
    return *this;
  }
  Ids& E() {
    v.push_back(K3Chat().end_of_msg_id());
    return *this;
  }
  Ids& Id(int32_t id) {
    v.push_back(id);
    return *this;
  }
};

const chat::ChatRequestInputs& ThinkPrompt() {
  static const chat::ChatRequestInputs in = Request(ojson::array({kUser}));
  return in;
}

void ExpectNoControlText(const Parsed& p) {
  for (const char* marker : {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"}) {
    EXPECT_EQ(p.all.content.find(marker), std::string::npos) << p.all.content;
    EXPECT_EQ(p.all.reasoning.find(marker), std::string::npos) << p.all.reasoning;
  }
}

TEST(XtmlParser, WellFormedHandWrittenAnswer) {
  Ids ids;
  ids.T("plan").C("think").O("response").T("Hi").C("response").O("tools");
  ids.O("call tool=\"a&amp;b\" index=\"1\"").O("argument key=\"k&quot;q\" type=\"string\"").T("v \"x\"").C("argument");
  ids.O("argument key=\"n\"").T("no type: a string").C("argument").C("call");
  ids.O("call tool=\"j\" index=\"2\"").O("json type=\"object\"").T("{\"a\": [1, 2.5], \"b\": {}}").C("json").C("call");
  ids.O("call tool=\"empty\" index=\"3\"").C("call");
  ids.C("tools").C("message").E();
  Parsed p = Parse(ThinkPrompt(), ids.v);
  EXPECT_EQ(p.warning, "");
  EXPECT_EQ(p.all.reasoning, "plan");
  EXPECT_EQ(p.all.content, "Hi");
  ASSERT_EQ(p.all.tool_calls.size(), 3u);
  EXPECT_EQ(p.all.tool_calls[0].name, "a&b");
  EXPECT_EQ(ojson::parse(p.all.tool_calls[0].arguments), ojson({{"k\"q", "v \"x\""}, {"n", "no type: a string"}}));
  EXPECT_EQ(p.all.tool_calls[1].arguments, "{\"a\": [1, 2.5], \"b\": {}}");
  EXPECT_EQ(p.all.tool_calls[2].arguments, "{}");
}

TEST(XtmlParser, UnclosedToolCallBecomesContentWithAWarning) {
  Ids ids;
  ids.T("r").C("think").O("response").T("Hi").C("response").O("tools");
  ids.O("call tool=\"f\" index=\"1\"").O("argument key=\"x\" type=\"string\"").T("partial value");
  Parsed p = Parse(ThinkPrompt(), ids.v);
  EXPECT_TRUE(p.all.tool_calls.empty());
  EXPECT_EQ(p.all.content.rfind("Hi", 0), 0u) << p.all.content;
  EXPECT_NE(p.all.content.find("call tool=\"f\" index=\"1\""), std::string::npos) << p.all.content;
  EXPECT_NE(p.all.content.find("partial value"), std::string::npos) << p.all.content;
  EXPECT_NE(p.warning.find("not closed"), std::string::npos) << p.warning;
  ExpectNoControlText(p);
}

TEST(XtmlParser, ArgumentThatIsNotJsonBecomesContentAndLaterCallsStillParse) {
  Ids ids;
  ids.C("think").O("response").C("response").O("tools");
  ids.O("call tool=\"bad\" index=\"1\"").O("argument key=\"n\" type=\"number\"").T("three").C("argument").C("call");
  ids.O("call tool=\"good\" index=\"2\"").O("argument key=\"n\" type=\"number\"").T(" 3 ").C("argument").C("call");
  ids.C("tools").C("message").E();
  Parsed p = Parse(ThinkPrompt(), ids.v);
  ASSERT_EQ(p.all.tool_calls.size(), 1u);
  EXPECT_EQ(p.all.tool_calls[0].name, "good");
  EXPECT_EQ(p.all.tool_calls[0].index, 0);
  EXPECT_EQ(p.all.tool_calls[0].arguments, "{\"n\": 3}");
  EXPECT_NE(p.all.content.find("three"), std::string::npos);
  EXPECT_NE(p.warning.find("argument 'n' of type 'number' is not JSON"), std::string::npos) << p.warning;
}

TEST(XtmlParser, UnknownTagsStrayClosesAndTextOutsideChannelsBecomeContent) {
  {  // an unknown tag inside the response channel
    Ids ids;
    ids.C("think").O("response").T("A").O("b").T("B").C("b").T("C").C("response").C("message").E();
    Parsed p = Parse(ThinkPrompt(), ids.v);
    EXPECT_EQ(p.all.content, "AbBbC");
    EXPECT_NE(p.warning.find("unknown tag 'b'"), std::string::npos) << p.warning;
  }
  {  // text between the channels
    Ids ids;
    ids.C("think").O("response").T("A").C("response").T("stray").C("message").E();
    Parsed p = Parse(ThinkPrompt(), ids.v);
    EXPECT_EQ(p.all.content, "Astray");
    EXPECT_NE(p.warning.find("text outside the think and response channels"), std::string::npos) << p.warning;
  }
  {  // a close that matches nothing open
    Ids ids;
    ids.T("r").C("bogus").T("s").C("think");
    Parsed p = Parse(ThinkPrompt(), ids.v);
    EXPECT_EQ(p.all.reasoning, "rs");
    EXPECT_EQ(p.all.content, "bogus");
    EXPECT_NE(p.warning.find("stray closing tag 'bogus'"), std::string::npos) << p.warning;
  }
  {  // a tag never terminated by <|sep|>, and a header that is not NAME k="v"
    Ids ids;
    ids.T("r").Id(K3Chat().control_ids().open).T("think").C("think").O("response x=unquoted").T("y");
    Parsed p = Parse(ThinkPrompt(), ids.v);
    EXPECT_EQ(p.all.reasoning, "r");
    EXPECT_EQ(p.all.content, "thinkresponse x=unquotedy");
    EXPECT_NE(p.warning.find("not terminated by <|sep|>"), std::string::npos) << p.warning;
    EXPECT_NE(p.warning.find("unreadable tag"), std::string::npos) << p.warning;
  }
  {  // a call with no tool name
    Ids ids;
    ids.C("think").O("response").C("response").O("tools").O("call index=\"1\"").C("call").C("tools").C("message").E();
    Parsed p = Parse(ThinkPrompt(), ids.v);
    EXPECT_TRUE(p.all.tool_calls.empty());
    EXPECT_EQ(p.all.content, "call index=\"1\"call");
    EXPECT_NE(p.warning.find("a call without a tool name"), std::string::npos) << p.warning;
  }
}

TEST(XtmlParser, ChannelsLeftOpenAreClosedWithAWarning) {
  {  // generation stopped (length) inside the think channel: the reasoning so far stands
    Parsed p = Parse(ThinkPrompt(), Ids().T("still thinking").v);
    EXPECT_EQ(p.all.reasoning, "still thinking");
    EXPECT_NE(p.warning.find("the think tag was not closed"), std::string::npos) << p.warning;
  }
  {  // the tools block opened without closing the response channel
    Ids ids;
    ids.C("think")
        .O("response")
        .T("Hi")
        .O("tools")
        .O("call tool=\"f\" index=\"1\"")
        .C("call")
        .C("tools")
        .C("message")
        .E();
    Parsed p = Parse(ThinkPrompt(), ids.v);
    EXPECT_EQ(p.all.content, "Hi");
    ASSERT_EQ(p.all.tool_calls.size(), 1u);
    EXPECT_NE(p.warning.find("the response channel was not closed before 'tools'"), std::string::npos) << p.warning;
  }
}

TEST(XtmlParser, EndOfMessageStopsAndLaterOutputIsIgnored) {
  Ids ids;
  ids.T("r").C("think").O("response").T("done").C("response").C("message").E().T("more").O("response").T("x");
  Parsed p = Parse(ThinkPrompt(), ids.v);
  EXPECT_EQ(p.all.content, "done");
  EXPECT_NE(p.warning.find("ignored"), std::string::npos);
  EXPECT_TRUE(p.deltas.back().empty());  // Finish after <|end_of_msg|> adds nothing
}

TEST(XtmlParser, OtherSpecialAndUnknownIdsReadAsNothing) {
  Ids ids;
  ids.T("a").Id(6000).Id(6006).Id(6100).T("b").Id(99999).Id(-5).T("c");
  Parsed p = Parse(ThinkPrompt(), ids.v);
  EXPECT_EQ(p.all.reasoning, "abc");
  EXPECT_NE(p.warning.find("outside the vocabulary"), std::string::npos) << p.warning;
}

TEST(XtmlParser, CharactersSplitAcrossTokensAreNeverSplitInDeltas) {
  // Byte-level ids: every byte of a multi-byte character alone.
  std::vector<int32_t> ids;
  const std::string text = "中文 21°C ✓ 🙂";
  for (unsigned char byte : text) {
    const std::string one(1, static_cast<char>(byte));
    const int32_t id = testing::K3Tokenizer().TokenToId(one);
    ASSERT_GE(id, 0) << int(byte);
    ids.push_back(id);
  }
  ids.push_back(K3Chat().control_ids().close);
  for (int32_t id : Encode("think")) ids.push_back(id);
  ids.push_back(K3Chat().control_ids().sep);
  Parsed p = Parse(ThinkPrompt(), ids);
  EXPECT_EQ(p.all.reasoning, text);
  for (const ChatDelta& d : p.deltas) EXPECT_EQ(tok::FindInvalidUtf8(d.reasoning), std::string::npos);
  // An incomplete character at a control id reads as U+FFFD, as Decode does.
  Parsed cut = Parse(ThinkPrompt(), Ids().Id(ids[0]).C("think").v);
  EXPECT_EQ(cut.all.reasoning, "\xEF\xBF\xBD");
}

TEST(XtmlParser, CallIdsAreFreshAcrossParsers) {
  Ids ids;
  ids.C("think").O("response").C("response").O("tools").O("call tool=\"f\" index=\"1\"").C("call").C("tools");
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    Parsed p = Parse(ThinkPrompt(), ids.v);
    ASSERT_EQ(p.all.tool_calls.size(), 1u);
    EXPECT_TRUE(seen.insert(p.all.tool_calls[0].id).second);
  }
}

}  // namespace
}  // namespace ls::chat
