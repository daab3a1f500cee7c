// XtmlChatFormat through NewChatFormat: a Kimi K3 model gets XTML's renderer and parser and its
// end-of-message stop id; tool_choice reaches XTML's tool-choice message; the flags that cannot
// go with XTML are refused by name.
#include "chat/xtml_chat_format.h"

#include <gtest/gtest.h>

#include "chat/chat_format.h"
#include "chat/tool_call_format.h"
#include "tests/chat/parser_test_util.h"
#include "tokenizer/load_tokenizer.h"

namespace ls::chat {
namespace {

using ojson = nlohmann::ordered_json;

const std::string kK3 = std::string(LS_TEST_DATA_DIR) + "/k3/k3_tiny_bf16";
const std::string kTinyModel = std::string(LS_TEST_DATA_DIR) + "/../../models/tiny";

class XtmlChatFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = tok::LoadTokenizer(kK3);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::move(*t);
    auto x = XtmlChat::ForTokenizer(*tokenizer_);
    ASSERT_TRUE(x.ok()) << x.status();
    xtml_ = std::make_unique<XtmlChat>(*x);
  }
  ChatFormatOptions K3Options() const {
    ChatFormatOptions o;
    o.model_dir = kK3;
    o.family_tool_call_format = o.family_reasoning_format = "xtml";
    o.tokenizer = tokenizer_.get();
    return o;
  }
  static chat::ChatRequestInputs ToolRequest() {
    chat::ChatRequestInputs in;
    in.messages = ojson::parse(R"([{"role": "user", "content": "Weather in Lima?"}])");
    in.tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
    return in;
  }
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  std::unique_ptr<XtmlChat> xtml_;
};

TEST_F(XtmlChatFormatTest, KimiK3IsServedByXtmlWithItsEndOfMessageStop) {
  auto f = NewChatFormat(K3Options());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NE((*f)->Describe().find("\"chat_format\":\"xtml\""), std::string::npos) << (*f)->Describe();
  EXPECT_EQ((*f)->stop_token_ids(), std::vector<int32_t>{xtml_->end_of_msg_id()});
  EXPECT_TRUE((*f)->parses_tool_calls());
  const chat::ChatRequestInputs in = ToolRequest();
  auto p = (*f)->Render(in, {});
  ASSERT_TRUE(p.ok()) << p.status();
  auto want = xtml_->Render(in);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(p->ids, *want) << "the prompt is XtmlChat's, id for id";
  EXPECT_TRUE(p->text.empty());
}

TEST_F(XtmlChatFormatTest, ToolChoiceIsWrittenAsXtmlsToolChoiceMessage) {
  auto f = NewChatFormat(K3Options());
  ASSERT_TRUE(f.ok()) << f.status();
  chat::ChatRequestInputs in = ToolRequest();
  for (auto [mode, kwarg] : {std::pair{ToolChoice::Mode::kRequired, "required"}, {ToolChoice::Mode::kNone, "none"}}) {
    RenderOptions o;
    o.tool_choice.mode = mode;
    auto p = (*f)->Render(in, o);
    ASSERT_TRUE(p.ok()) << p.status();
    chat::ChatRequestInputs asked = in;
    asked.chat_template_kwargs["tool_choice"] = kwarg;
    EXPECT_EQ(p->ids, *xtml_->Render(asked)) << kwarg;
    EXPECT_NE(p->ids, *xtml_->Render(in)) << kwarg << ": the prompt says it";
  }
  RenderOptions auto_choice;
  EXPECT_EQ((*f)->Render(in, auto_choice)->ids, *xtml_->Render(in));
}

TEST_F(XtmlChatFormatTest, ItsParserReadsAGeneratedCall) {
  auto f = NewChatFormat(K3Options());
  ASSERT_TRUE(f.ok()) << f.status();
  const chat::ChatRequestInputs in = ToolRequest();
  auto p = (*f)->Render(in, {});
  ASSERT_TRUE(p.ok());
  // A reply as K3 writes one: the think channel, then a call block, then the message's end.
  const xtml::ControlIds& c = xtml_->control_ids();
  std::vector<int32_t> out;
  auto text = [&](const std::string& s) {
    auto ids = tokenizer_->Encode(s, tok::EncodeOptions{false, tok::SpecialText::kAsText});
    ASSERT_TRUE(ids.ok());
    out.insert(out.end(), ids->begin(), ids->end());
  };
  auto open = [&](const std::string& tag) { out.push_back(c.open), text(tag), out.push_back(c.sep); };
  auto close = [&](const std::string& tag) { out.push_back(c.close), text(tag), out.push_back(c.sep); };
  text("hmm");
  close("think");
  open("tools");
  open("call tool=\"get_weather\" index=\"1\"");
  open("argument key=\"city\" type=\"string\"");
  text("Lima");
  close("argument");
  close("call");
  close("tools");
  close("message");
  out.push_back(xtml_->end_of_msg_id());
  auto parser = (*f)->NewParser(in, {}, *p);
  ChatDelta all;
  for (int32_t id : out) all.Append(parser->Feed(id, ""));
  all.Append(parser->Finish());
  EXPECT_EQ(all.reasoning, "hmm");
  ASSERT_EQ(all.tool_calls.size(), 1u) << "content: " << all.content << " warning: " << parser->warning();
  EXPECT_EQ(all.tool_calls[0].name, "get_weather");
  EXPECT_EQ(ojson::parse(all.tool_calls[0].arguments), ojson::parse(R"({"city": "Lima"})"));
}

TEST_F(XtmlChatFormatTest, FlagsThatCannotGoWithXtmlAreRefusedByName) {
  ChatFormatOptions o = K3Options();
  o.reasoning_parser = "think";
  EXPECT_NE(NewChatFormat(o).status().message().find("--reasoning_parser"), std::string::npos);
  o = K3Options();
  o.family_tool_call_format = "hermes";
  o.family_reasoning_format.clear();
  o.tool_call_parser = "xtml";
  o.chat_template_file = std::string(LS_TEST_DATA_DIR) + "/chat_templates/templates/hermes_style.jinja";
  EXPECT_NE(NewChatFormat(o).status().message().find("--chat_template"), std::string::npos);
  // A tokenizer without XTML's control tokens cannot serve it.
  auto tiny = tok::LoadTokenizer(kTinyModel);
  ASSERT_TRUE(tiny.ok());
  ChatFormatOptions t;
  t.model_dir = kTinyModel;
  t.tokenizer = tiny->get();
  t.tool_call_parser = "xtml";
  EXPECT_NE(NewChatFormat(t).status().message().find("<|open|>"), std::string::npos);
  // With --chat_template, a K3 model is served by that template instead.
  o = K3Options();
  o.chat_template_file = std::string(LS_TEST_DATA_DIR) + "/chat_templates/templates/hermes_style.jinja";
  auto jinja = NewChatFormat(o);
  ASSERT_TRUE(jinja.ok()) << jinja.status();
  EXPECT_NE((*jinja)->Describe().find("\"chat_format\":\"jinja\""), std::string::npos);
}

TEST_F(XtmlChatFormatTest, QwenNamesTheHermesParser) {
  ASSERT_NE(FindToolCallFormat("qwen"), nullptr);
  EXPECT_EQ(FindToolCallFormat("qwen")->name, "hermes");
}

}  // namespace
}  // namespace ls::chat
