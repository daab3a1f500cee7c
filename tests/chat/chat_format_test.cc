// JinjaChatFormat and NewChatFormat: rendering with tool_choice (forced call openings), continued
// final messages, reasoning opened by the prompt, the parsers chosen from the flags, and the
// choice of XTML for Kimi K3.
#include "chat/chat_format.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "chat/jinja_chat_format.h"
#include "chat/think_tag_parser.h"
#include "tests/chat/parser_test_util.h"
#include "tokenizer/load_tokenizer.h"

namespace ls::chat {
namespace {

using ojson = nlohmann::ordered_json;

const std::string kTiny = std::string(LS_TEST_DATA_DIR) + "/../../models/tiny";
const std::string kTemplates = std::string(LS_TEST_DATA_DIR) + "/chat_templates/templates/";

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ChatFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = tok::LoadTokenizer(kTiny);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::move(*t);
  }
  std::unique_ptr<JinjaChatFormat> Format(const std::string& template_name, bool think) {
    auto t = chat::ChatTemplate::FromFile(kTemplates + template_name, {{"bos_token", ""}, {"eos_token", ""}});
    EXPECT_TRUE(t.ok()) << t.status();
    auto n = std::make_shared<int>(0);
    return std::make_unique<JinjaChatFormat>(std::move(*t), tokenizer_.get(), &HermesToolCallFormat(), think,
                                             [n] { return "call-" + std::to_string((*n)++); });
  }
  static chat::ChatRequestInputs WeatherRequest() {
    chat::ChatRequestInputs in;
    in.messages = ojson::parse(R"([{"role": "user", "content": "Weather in Lima?"}])");
    in.tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
    return in;
  }
  // The reply to `prompt` when the model writes `generated`.
  static Reply ReplyTo(const ChatFormat& f, const chat::ChatRequestInputs& in, const RenderOptions& o,
                       const ChatPrompt& prompt, const std::string& generated) {
    auto p = f.NewParser(in, o, prompt);
    return Parse(std::move(p), Bytes(generated));
  }
  std::unique_ptr<tok::Tokenizer> tokenizer_;
};

TEST_F(ChatFormatTest, NamedToolChoiceEndsThePromptWithTheCallOpening) {
  auto f = Format("hermes_style.jinja", false);
  const chat::ChatRequestInputs in = WeatherRequest();
  RenderOptions o;
  o.tool_choice = {ToolChoice::Mode::kFunction, "get_weather"};
  auto p = f->Render(in, o);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string opening = "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ";
  ASSERT_GE(p->text.size(), opening.size());
  EXPECT_EQ(p->text.substr(p->text.size() - opening.size()), opening);
  EXPECT_EQ(p->prefill, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  EXPECT_EQ(*tokenizer_->Decode(p->ids), p->text) << "the ids are the rendered text";
  const Reply r = ReplyTo(*f, in, o, *p, "{\"city\": \"Lima\"}}\n</tool_call>");
  ASSERT_EQ(r.delta.tool_calls.size(), 1u);
  EXPECT_EQ(r.delta.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.delta.tool_calls[0].arguments, R"({"city":"Lima"})");
  EXPECT_EQ(r.delta.content, "");
}

TEST_F(ChatFormatTest, RequiredToolChoiceLetsTheModelNameTheFunction) {
  auto f = Format("hermes_style.jinja", false);
  const chat::ChatRequestInputs in = WeatherRequest();
  RenderOptions o;
  o.tool_choice.mode = ToolChoice::Mode::kRequired;
  auto p = f->Render(in, o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->prefill, "<tool_call>\n{\"name\": \"");
  const Reply r = ReplyTo(*f, in, o, *p, "get_weather\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(r.delta.tool_calls.size(), 1u);
  EXPECT_EQ(r.delta.tool_calls[0].name, "get_weather");
  // What the model writes instead of a call comes back as the text it wrote after the opening.
  const Reply bad = ReplyTo(*f, in, o, *p, "And the LORD said");
  EXPECT_TRUE(bad.delta.tool_calls.empty());
  EXPECT_EQ(bad.delta.content, "<tool_call>\n{\"name\": \"And the LORD said");
  EXPECT_NE(bad.warning, "");
}

TEST_F(ChatFormatTest, ToolChoiceNoneRendersToolsButReadsNoCalls) {
  auto f = Format("hermes_style.jinja", false);
  const chat::ChatRequestInputs in = WeatherRequest();
  RenderOptions o;
  o.tool_choice.mode = ToolChoice::Mode::kNone;
  auto p = f->Render(in, o);
  ASSERT_TRUE(p.ok());
  EXPECT_NE(p->text.find("<tools>"), std::string::npos) << "vLLM renders tools with tool_choice none too";
  EXPECT_EQ(p->prefill, "");
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";
  const Reply r = ReplyTo(*f, in, o, *p, call);
  EXPECT_TRUE(r.delta.tool_calls.empty());
  EXPECT_EQ(r.delta.content, call);
}

TEST_F(ChatFormatTest, ContinuedFinalMessageWithAPartialCallIsCompletedByTheReply) {
  auto f = Format("hermes_style.jinja", false);
  chat::ChatRequestInputs in = WeatherRequest();
  in.messages.push_back({{"role", "assistant"}, {"content", "<tool_call>\n{\"name\": \"get_weather\", \"argu"}});
  in.add_generation_prompt = false;
  in.continue_final_message = true;
  auto p = f->Render(in, {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->prefill, "<tool_call>\n{\"name\": \"get_weather\", \"argu");
  const Reply r = ReplyTo(*f, in, {}, *p, "ments\": {\"city\": \"Lima\"}}\n</tool_call>");
  ASSERT_EQ(r.delta.tool_calls.size(), 1u);
  EXPECT_EQ(r.delta.tool_calls[0].arguments, R"({"city":"Lima"})");
  // Plain text continued: the reply is only what was generated, as vLLM returns it.
  in.messages.back()["content"] = "The weather is ";
  auto q = f->Render(in, {});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(ReplyTo(*f, in, {}, *q, "sunny.").delta.content, "sunny.");
}

TEST_F(ChatFormatTest, ReasoningOpenedByThePromptStartsTheReplyInReasoning) {
  auto t = chat::ChatTemplate::FromString(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}");
  ASSERT_TRUE(t.ok());
  JinjaChatFormat f(*t, tokenizer_.get(), &HermesToolCallFormat(), /*think=*/true);
  chat::ChatRequestInputs in = WeatherRequest();
  auto p = f.Render(in, {});
  ASSERT_TRUE(p.ok());
  const Reply r = ReplyTo(f, in, {}, *p, "It is a weather question.\n</think>\n\nLet me look.");
  EXPECT_EQ(r.delta.reasoning, "It is a weather question.\n");
  EXPECT_EQ(r.delta.content, "Let me look.");
  // A forced call closes the open think block first.
  RenderOptions o;
  o.tool_choice = {ToolChoice::Mode::kFunction, "get_weather"};
  auto forced = f.Render(in, o);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->prefill, "</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  const Reply c = ReplyTo(f, in, o, *forced, "{}}\n</tool_call>");
  ASSERT_EQ(c.delta.tool_calls.size(), 1u);
  EXPECT_EQ(c.delta.reasoning, "");
}

TEST_F(ChatFormatTest, ContentFormatFollowsHowTheTemplateReadsContent) {
  EXPECT_EQ(DetectContentFormat(Read(kTemplates + "gemma_style.jinja")), ContentFormat::kOpenAi);
  EXPECT_EQ(DetectContentFormat(Read(kTemplates + "glm45_style.jinja")), ContentFormat::kOpenAi);
  // Reads parts with selectattr/map inside a macro (and strings with `is string`).
  EXPECT_EQ(DetectContentFormat(Read(kTemplates + "hermes_style.jinja")), ContentFormat::kOpenAi);
  EXPECT_EQ(DetectContentFormat(Read(kTemplates + "qwen3_style.jinja")), ContentFormat::kString);
  auto tiny = chat::ChatTemplate::ForModelDir(kTiny);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(DetectContentFormat(tiny->source()), ContentFormat::kString);
  // Content reaching a loop through a macro's parameter (by position or by name), through `set`
  // chains, `or` and `default`, or read by index, key or a list filter: parts.
  const char* parts[] = {
      "{% macro render(c) %}{% for part in c %}{{ part.text }} {% endfor %}{% endmacro %}"
      "{% for message in messages %}{{ render(message.content) }}{% endfor %}",
      "{% for message in messages %}{{ render(x=message['content']) }}{% endfor %}"
      "{% macro render(x) %}{% for p in x %}{{ p['text'] }}{% endfor %}{% endmacro %}",
      "{% for m in messages %}{% set c = m.content %}{% set d = c or [] %}{% for p in d %}{{ p }}{% endfor %}"
      "{% endfor %}",
      "{% for m in messages %}{{ (m.content | default([])) | selectattr('type', 'equalto', 'text') | list }}"
      "{% endfor %}",
      "{% for m in messages %}{{ m.content[0].text }}{% endfor %}",
      "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{{ m.content | map(attribute="
      "'text') | join(' ') }}{% endif %}{% endfor %}",
      "{% macro outer(v) %}{{ inner(v) }}{% endmacro %}{% macro inner(w) %}{% for p in w %}{{ p.text }}{% endfor %}"
      "{% endmacro %}{% for m in messages %}{{ outer(m.content) }}{% endfor %}",
  };
  for (const char* t : parts) EXPECT_EQ(DetectContentFormat(t), ContentFormat::kOpenAi) << t;
  // Content printed, trimmed or compared as a string; loops over other things: one string.
  const char* strings[] = {
      "{% for message in messages %}{{ message.content | trim }}{% endfor %}",
      "{% for m in messages %}{% set c = m.content %}{{ c }}{% for t in tools %}{{ t }}{% endfor %}{% endfor %}",
      "{% macro render(c) %}{{ c }}{% endmacro %}{% for m in messages %}{{ render(m.content) }}{% endfor %}",
      "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% endif %}{% endfor %}",
      "{% for m in messages %}{% for k in m.tool_calls %}{{ k.function.name }}{% endfor %}{% endfor %}",
      "{% for m in messages %}{{ m.content[:100] }}",  // not a template: strings, rendering reports it
  };
  for (const char* t : strings) EXPECT_EQ(DetectContentFormat(t), ContentFormat::kString) << t;
}

TEST_F(ChatFormatTest, ContentFormatFlagOverridesTheTemplate) {
  ChatFormatOptions o;
  o.model_dir = kTiny;
  o.tokenizer = tokenizer_.get();
  o.family_tool_call_format = "hermes";  // as StableLatentMoE names it
  o.chat_template_file = kTemplates + "gemma_style.jinja";
  auto detected = NewChatFormat(o);
  ASSERT_TRUE(detected.ok()) << detected.status();
  EXPECT_TRUE((*detected)->content_as_parts());
  EXPECT_NE((*detected)->Describe().find("\"content_format_from\":\"template\""), std::string::npos);
  o.content_format = "string";
  auto forced = NewChatFormat(o);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_FALSE((*forced)->content_as_parts());
  EXPECT_NE((*forced)->Describe().find("\"content_format\":\"string\""), std::string::npos);
  o.chat_template_file = kTemplates + "qwen3_style.jinja";
  o.content_format = "openai";
  auto openai = NewChatFormat(o);
  ASSERT_TRUE(openai.ok()) << openai.status();
  EXPECT_TRUE((*openai)->content_as_parts());
  o.content_format = "parts";
  auto bad = NewChatFormat(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--chat_template_content_format 'parts'"), std::string::npos)
      << bad.status();
}

TEST_F(ChatFormatTest, FlagsChooseTheParsers) {
  ChatFormatOptions o;
  o.model_dir = kTiny;
  o.tokenizer = tokenizer_.get();
  o.family_tool_call_format = "hermes";  // as StableLatentMoE names it
  auto tiny = NewChatFormat(o);
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_TRUE((*tiny)->parses_tool_calls()) << "the family's default: hermes";
  EXPECT_NE((*tiny)->Describe().find("\"reasoning_parser\":\"none\""), std::string::npos)
      << "the tiny model's template writes no </think>";
  EXPECT_FALSE((*tiny)->renders_tools());

  o.chat_template_file = kTemplates + "qwen3_style.jinja";
  auto qwen = NewChatFormat(o);
  ASSERT_TRUE(qwen.ok());
  EXPECT_NE((*qwen)->Describe().find("\"reasoning_parser\":\"think\""), std::string::npos) << (*qwen)->Describe();
  EXPECT_TRUE((*qwen)->renders_tools());
  // A family's reasoning format, when it names one, replaces the template's guess; the flag wins.
  o.family_reasoning_format = "none";
  auto family_none = NewChatFormat(o);
  ASSERT_TRUE(family_none.ok());
  EXPECT_NE((*family_none)->Describe().find("\"reasoning_parser\":\"none\""), std::string::npos);
  o.reasoning_parser = "think";
  auto flag_think = NewChatFormat(o);
  ASSERT_TRUE(flag_think.ok());
  EXPECT_NE((*flag_think)->Describe().find("\"reasoning_parser\":\"think\""), std::string::npos);
  o.reasoning_parser = "auto";
  o.family_reasoning_format.clear();
  // The family's tool-call format is what auto reads; a family without one gets none.
  o.family_tool_call_format = "";
  auto no_tools = NewChatFormat(o);
  ASSERT_TRUE(no_tools.ok());
  EXPECT_FALSE((*no_tools)->parses_tool_calls());
  o.family_tool_call_format = "hermes";

  o.tool_call_parser = "none";
  o.reasoning_parser = "none";
  auto plain = NewChatFormat(o);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->parses_tool_calls());

  o.tool_call_parser = "llama3_json";
  auto bad = NewChatFormat(o);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--tool_call_parser: unknown parser 'llama3_json'"), std::string::npos);
  o.tool_call_parser = "auto";
  o.reasoning_parser = "deepseek_r1";
  EXPECT_NE(NewChatFormat(o).status().message().find("--reasoning_parser"), std::string::npos);
  o.reasoning_parser = "auto";
  o.chat_template_file = "/nonexistent.jinja";
  EXPECT_FALSE(NewChatFormat(o).ok());
}

TEST_F(ChatFormatTest, XtmlIsChosenForKimiK3AndForXtmlTokenizersWithoutATemplate) {
  ChatFormatOptions o;
  o.family_tool_call_format = "xtml";
  EXPECT_TRUE(UsesXtmlChat(o, /*has_template=*/false));
  EXPECT_TRUE(UsesXtmlChat(o, /*has_template=*/true));
  o.chat_template_file = "chat.jinja";
  EXPECT_FALSE(UsesXtmlChat(o, false)) << "--chat_template wins";
  o.chat_template_file.clear();
  o.family_tool_call_format = "kimi_k2";
  const FakeVocab xtml({{"<|open|>", 1}, {"<|close|>", 2}, {"<|sep|>", 3}, {"<|end_of_msg|>", 4}});
  o.tokenizer = &xtml;
  EXPECT_TRUE(UsesXtmlChat(o, false));
  EXPECT_FALSE(UsesXtmlChat(o, true));
  o.tokenizer = tokenizer_.get();
  EXPECT_FALSE(UsesXtmlChat(o, false));
}

}  // namespace
}  // namespace ls::chat
