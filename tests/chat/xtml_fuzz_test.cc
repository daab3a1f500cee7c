// Randomised checks of the XTML renderer and parser together: random assistant messages rendered
// and parsed back exactly; the same streams mutated (ids dropped, inserted, repeated, swapped,
// cut), and purely random id streams, never crash and keep the parser's invariants — UTF-8
// pieces, OpenAI-shaped tool-call deltas whose arguments join into a JSON object, and, when no
// warning was raised, a result that renders and parses back to itself. Fixed seeds.
#include <gtest/gtest.h>

#include <map>
#include <random>
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

const ojson& History() {
  static const ojson h = ojson::array({{{"role", "user"}, {"content", "Do things."}}});
  return h;
}

// The ids generated after History()'s prompt when the model writes `assistant`.
std::vector<int32_t> Generated(const ojson& assistant) {
  auto prompt = K3Chat().Render(Request(History()));
  ojson all = History();
  all.push_back(assistant);
  auto full = K3Chat().Render(Request(all, ojson::object(), false));
  EXPECT_TRUE(prompt.ok() && full.ok()) << full.status();
  if (!prompt.ok() || !full.ok() || full->size() < prompt->size()) return {};
  return std::vector<int32_t>(full->begin() + prompt->size(), full->end());
}

class Fuzz {
 public:
  explicit Fuzz(uint32_t seed) : rng_(seed) {}

  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  std::string Text() {
    static const char* kWords[] = {"a",
                                   "the ",
                                   "Paris",
                                   " 21°C",
                                   "中文",
                                   "🙂",
                                   "\"q\"",
                                   "\\",
                                   "\n",
                                   "  ",
                                   "&amp;",
                                   "<|open|>",
                                   "<|close|>call<|sep|>",
                                   "{\"x\": 1}",
                                   "é",
                                   "\t",
                                   "</think>",
                                   "?"};
    std::string s;
    const size_t n = Pick(6);
    for (size_t i = 0; i < n; ++i) s += kWords[Pick(std::size(kWords))];
    return s;
  }

  ojson Value(int depth = 0) {
    switch (Pick(depth > 1 ? 5 : 7)) {
      case 0:
        return Text();
      case 1:
        return static_cast<int64_t>(Pick(2000)) - 1000;
      case 2:
        return static_cast<double>(Pick(1000)) / 8.0 - 3.0;
      case 3:
        return Chance(0.5);
      case 4:
        return nullptr;
      case 5: {
        ojson a = ojson::array();
        for (size_t i = Pick(3); i > 0; --i) a.push_back(Value(depth + 1));
        return a;
      }
      default: {
        ojson o = ojson::object();
        for (size_t i = Pick(3); i > 0; --i) o["k" + std::to_string(Pick(9))] = Value(depth + 1);
        return o;
      }
    }
  }

  ojson Answer() {
    static const char* kNames[] = {"get_weather", "search", "a&b", "q\"uote", "工具", "x"};
    ojson m = {{"role", "assistant"}, {"reasoning_content", Text()}, {"content", Text()}};
    ojson calls = ojson::array();
    for (size_t i = Pick(4); i > 0; --i) {
      ojson args = ojson::object();
      for (size_t k = Pick(4); k > 0; --k) args[Chance(0.2) ? Text() : "arg" + std::to_string(Pick(9))] = Value();
      // As clients send them: compact, indented, or as json.dumps writes them.
      const size_t style = Pick(3);
      const std::string text = style == 0 ? args.dump() : style == 1 ? args.dump(2) : xtml::PythonJson(args);
      calls.push_back({{"id", "c" + std::to_string(i)},
                       {"type", "function"},
                       {"function", {{"name", kNames[Pick(std::size(kNames))]}, {"arguments", text}}}});
    }
    if (!calls.empty()) m["tool_calls"] = calls;
    return m;
  }

  // An id a corrupted stream might hold.
  int32_t NoiseId() {
    static const std::vector<int32_t> kPalette = [] {
      std::vector<int32_t> ids = {6002, 6003, 6004, 6005, 6000, 6006, 6255, 99999, -1};
      for (const char* t :
           {"think", "response", "tools",  "message", "call", "argument", "json", " tool", "=\"", "\"",
            "key",   " type",    "number", "string",  "1",    "{",        "}",    "x",     " ",   "中"}) {
        auto e = Encode(t);
        ids.insert(ids.end(), e.begin(), e.end());
      }
      ids.push_back(testing::K3Tokenizer().TokenToId("\xE4"));  // the first byte of 中 alone
      return ids;
    }();
    return Chance(0.8) ? kPalette[Pick(kPalette.size())] : static_cast<int32_t>(Pick(6000));
  }

  // Zero to three edits; some keep the stream well formed (a text id next to a text id).
  std::vector<int32_t> Mutate(std::vector<int32_t> ids) {
    const auto& control = K3Chat().control_ids();
    for (size_t n = Pick(4); n > 0; --n) {
      const size_t at = ids.empty() ? 0 : Pick(ids.size());
      switch (Pick(6)) {
        case 5:
          if (at < ids.size() && !control.IsControl(ids[at]) && at > 0 && !control.IsControl(ids[at - 1]))
            ids.insert(ids.begin() + at, static_cast<int32_t>(Pick(6000)));
          break;
        case 0:
          if (!ids.empty()) ids.erase(ids.begin() + at);
          break;
        case 1:
          ids.insert(ids.begin() + at, NoiseId());
          break;
        case 2:
          if (!ids.empty()) {
            const size_t len = std::min(ids.size() - at, 1 + Pick(8));
            std::vector<int32_t> span(ids.begin() + at, ids.begin() + at + len);
            ids.insert(ids.begin() + at, span.begin(), span.end());
          }
          break;
        case 3:
          if (at + 1 < ids.size()) std::swap(ids[at], ids[at + 1]);
          break;
        default:
          ids.resize(at);
      }
    }
    return ids;
  }

  std::vector<int32_t> Noise() {
    std::vector<int32_t> ids(Pick(80));
    for (int32_t& id : ids) id = NoiseId();
    return ids;
  }

 private:
  std::mt19937 rng_;
};

// The invariants every parse keeps. Returns the parse's tool calls (index -> name, arguments).
void CheckInvariants(const Parsed& p) {
  static const std::regex id_shape("call_[0-9A-Za-z]{24}");
  std::map<int32_t, std::string> args;
  std::set<std::string> ids;
  int32_t next = 0;
  for (const ChatDelta& d : p.deltas) {
    for (const std::string* s : {&d.reasoning, &d.content})
      ASSERT_EQ(tok::FindInvalidUtf8(*s), std::string::npos) << "not UTF-8: " << *s;
    for (const ToolCallDelta& c : d.tool_calls) {
      ASSERT_EQ(tok::FindInvalidUtf8(c.name), std::string::npos);
      ASSERT_EQ(tok::FindInvalidUtf8(c.arguments), std::string::npos);
      if (!args.count(c.index)) {
        ASSERT_EQ(c.index, next++) << "calls start in order";
        ASSERT_TRUE(std::regex_match(c.id, id_shape)) << c.id;
        ASSERT_TRUE(ids.insert(c.id).second) << "duplicate id " << c.id;
        ASSERT_FALSE(c.name.empty());
        args[c.index] = "";
      } else {
        ASSERT_TRUE(c.id.empty() && c.name.empty()) << "only a call's first delta has its id and name";
      }
      args[c.index] += c.arguments;
    }
  }
  for (const auto& [index, text] : args) {
    ojson v = ojson::parse(text, nullptr, false);
    ASSERT_TRUE(!v.is_discarded() && v.is_object()) << "arguments of call " << index << ": " << text;
  }
  ASSERT_EQ(p.all.tool_calls.size(), args.size());
}

// A parse without warnings is a message the renderer writes back into the same parse.
void CheckReparses(const Parsed& p) {
  ojson m = {{"role", "assistant"}, {"reasoning_content", p.all.reasoning}, {"content", p.all.content}};
  if (!p.all.tool_calls.empty()) {
    m["tool_calls"] = ojson::array();
    for (const ToolCallDelta& c : p.all.tool_calls)
      m["tool_calls"].push_back(
          {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  Parsed again = Parse(Request(History()), Generated(m));
  ASSERT_EQ(again.warning, "");
  EXPECT_EQ(again.all.reasoning, p.all.reasoning);
  EXPECT_EQ(again.all.content, p.all.content);
  ASSERT_EQ(again.all.tool_calls.size(), p.all.tool_calls.size());
  for (size_t i = 0; i < p.all.tool_calls.size(); ++i) {
    EXPECT_EQ(again.all.tool_calls[i].name, p.all.tool_calls[i].name);
    EXPECT_EQ(again.all.tool_calls[i].arguments, p.all.tool_calls[i].arguments);
  }
}

TEST(XtmlFuzz, RandomAnswersRoundTripExactly) {
  Fuzz f(20260716);
  for (int i = 0; i < 400 && !HasFailure(); ++i) {
    SCOPED_TRACE(i);
    const ojson answer = f.Answer();
    SCOPED_TRACE(answer.dump());
    Parsed p = Parse(Request(History()), Generated(answer));
    CheckInvariants(p);
    EXPECT_EQ(p.warning, "");
    EXPECT_EQ(p.all.reasoning, answer["reasoning_content"]);
    EXPECT_EQ(p.all.content, answer["content"]);
    const size_t n = answer.contains("tool_calls") ? answer["tool_calls"].size() : 0;
    ASSERT_EQ(p.all.tool_calls.size(), n);
    for (size_t c = 0; c < n; ++c) {
      const ojson& want = answer["tool_calls"][c]["function"];
      EXPECT_EQ(p.all.tool_calls[c].name, want["name"]);
      EXPECT_EQ(ojson::parse(p.all.tool_calls[c].arguments), ojson::parse(want["arguments"].get<std::string>()));
    }
    CheckReparses(p);
  }
}

TEST(XtmlFuzz, MutatedAndRandomStreamsKeepTheInvariants) {
  Fuzz f(7);
  int clean = 0, warned = 0;
  for (int i = 0; i < 3000 && !HasFailure(); ++i) {
    SCOPED_TRACE(i);
    const std::vector<int32_t> ids = i % 2 == 0 ? f.Mutate(Generated(f.Answer())) : f.Noise();
    SCOPED_TRACE(::testing::PrintToString(ids));
    const chat::ChatRequestInputs& prompt = i % 3 == 0   ? Request(History(), {{"thinking", false}})
                                           : i % 3 == 1 ? Request(History())
                                                        : Request(History(), {}, false);
    Parsed p = Parse(prompt, ids);
    CheckInvariants(p);
    if (p.warning.empty()) {
      ++clean;
      CheckReparses(p);
    } else {
      ++warned;
    }
  }
  // Both kinds of outcome were exercised.
  EXPECT_GT(clean, 150);
  EXPECT_GT(warned, 1000);
}

}  // namespace
}  // namespace ls::chat
