// ChatTemplate: which template a model directory gives (as transformers picks it), the special
// tokens and variables a template sees, message normalisation, continue_final_message, and the
// errors a client gets.
#include "chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace ls::chat {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

class ModelDir {
 public:
  explicit ModelDir(const std::string& name) : dir_(fs::path(testing::TempDir()) / ("chat_template_" + name)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~ModelDir() { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) const {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel, std::ios::binary) << text;
  }
  void Config(const ojson& cfg) const { Write("tokenizer_config.json", cfg.dump()); }
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
};

ChatRequestInputs Inputs(ojson messages) {
  ChatRequestInputs in;
  in.messages = std::move(messages);
  return in;
}

const ojson kUserHi = ojson::parse(R"([{"role": "user", "content": "Hi"}])");

TEST(ChatTemplate, ShippedTinyModelRendersItsQwen2ChatMLTemplate) {
  auto t = ChatTemplate::ForModelDir(std::string(LS_TEST_DATA_DIR) + "/../../models/tiny");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(
      *t->Render({{"user", "Who made the heaven?"}}, true),
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWho made the heaven?<|im_end|>\n"
      "<|im_start|>assistant\n");
  EXPECT_EQ(*t->Render({{"system", "S"}, {"user", "U"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
}

TEST(ChatTemplate, BuiltInChatMLHasNoDefaultSystemMessage) {
  EXPECT_EQ(*ChatTemplate::ChatML().Render({{"user", "U"}}, true),
            "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, ModelWithoutTemplateFallsBackToChatMLWithItsSpecialTokens) {
  ModelDir d("no_template");
  d.Config({{"bos_token", "<s>"}});
  auto t = ChatTemplate::ForModelDir(d.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->origin(), "built-in ChatML");
  EXPECT_EQ(*t->Render(Inputs(kUserHi)), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  ASSERT_EQ(t->special_tokens().size(), 1u);
  ModelDir empty("no_config");
  EXPECT_TRUE(ChatTemplate::ForModelDir(empty.path()).ok());
}

TEST(ChatTemplate, SpecialTokensComeAsStringsOrAddedTokenObjects) {
  ModelDir d("special_tokens");
  d.Config({{"chat_template", "{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}|{{ unk_token }}"},
            {"bos_token", {{"content", "<s>"}, {"lstrip", false}, {"__type", "AddedToken"}}},
            {"eos_token", "</s>"},
            {"pad_token", nullptr},
            {"unk_token", "<unk>"},
            {"image_token", "<img>"}});
  auto t = ChatTemplate::ForModelDir(d.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render(Inputs(kUserHi)), "<s>|</s>|False|<unk>");
  d.Config({{"chat_template", "x"}, {"bos_token", 7}});
  auto bad = ChatTemplate::ForModelDir(d.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bos_token must be a string or an AddedToken object"), std::string::npos);
}

TEST(ChatTemplate, NamedTemplatesPickToolUseWhenToolsAreGiven) {
  ModelDir d("named");
  d.Config({{"chat_template",
             {{{"name", "default"}, {"template", "plain"}},
              {{"name", "tool_use"}, {"template", "tools:{{ tools | length }}"}}}}});
  auto t = ChatTemplate::ForModelDir(d.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->has_template("tool_use"));
  ChatRequestInputs in = Inputs(kUserHi);
  EXPECT_EQ(*t->Render(in), "plain");
  in.tools = ojson::array({{{"type", "function"}}});
  EXPECT_EQ(*t->Render(in), "tools:1");
  in.tools = ojson::array();  // an empty list is still "tools given", as in transformers
  EXPECT_EQ(*t->Render(in), "tools:0");
}

TEST(ChatTemplate, NamedTemplatesWithoutDefaultAreRefused) {
  ModelDir d("no_default");
  d.Config({{"chat_template", {{{"name", "rag"}, {"template", "x"}}, {{"name", "tool_use"}, {"template", "y"}}}}});
  auto t = ChatTemplate::ForModelDir(d.path());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("none of the chat templates ('rag', 'tool_use') is named 'default'"),
            std::string::npos)
      << t.status();
}

TEST(ChatTemplate, ChatTemplateJinjaFileTakesPriorityOverTheConfig) {
  ModelDir d("jinja_file");
  d.Config({{"chat_template", "from config"}, {"eos_token", "</s>"}});
  d.Write("chat_template.jinja", "from file {{ eos_token }}\n");
  auto t = ChatTemplate::ForModelDir(d.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render(Inputs(kUserHi)), "from file </s>");  // one trailing newline is dropped, as jinja2 does
  d.Write("additional_chat_templates/tool_use.jinja", "tool file");
  t = ChatTemplate::ForModelDir(d.path());
  ASSERT_TRUE(t.ok()) << t.status();
  ChatRequestInputs in = Inputs(kUserHi);
  in.tools = ojson::array();
  EXPECT_EQ(*t->Render(in), "tool file");
}

TEST(ChatTemplate, TemplateFileOverridesTheModelsTemplateButKeepsItsSpecialTokens) {
  ModelDir d("override");
  d.Config({{"chat_template", "model's"}, {"bos_token", "<s>"}});
  d.Write("mine.jinja", "{{ bos_token }}mine");
  auto t = ChatTemplate::ForModelDir(d.path(), d.path() + "/mine.jinja");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render(Inputs(kUserHi)), "<s>mine");
  auto missing = ChatTemplate::ForModelDir(d.path(), d.path() + "/absent.jinja");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto f = ChatTemplate::FromFile(d.path() + "/mine.jinja", {{"bos_token", "B"}});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->Render(Inputs(kUserHi)), "Bmine");
}

TEST(ChatTemplate, BrokenTemplatesAreLoadErrorsNamingWhereAndWhat) {
  ModelDir d("broken");
  d.Config({{"chat_template", "{% for m in messages %}\n{{ m.content | nosuch }}\n{% endfor %}"}});
  auto t = ChatTemplate::ForModelDir(d.path());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), d.path() + "/tokenizer_config.json chat_template: line 2: unknown filter 'nosuch'");
  d.Config({{"chat_template", "{% if x %}never closed"}});
  t = ChatTemplate::ForModelDir(d.path());
  EXPECT_NE(t.status().message().find("line 1: unexpected end of template: the 'if' block opened on line 1"),
            std::string::npos)
      << t.status();
  d.Write("tokenizer_config.json", "{not json");
  t = ChatTemplate::ForModelDir(d.path());
  EXPECT_EQ(t.status().message(), d.path() + "/tokenizer_config.json: invalid JSON");
  d.Config({{"chat_template", 5}});
  EXPECT_FALSE(ChatTemplate::ForModelDir(d.path()).ok());
}

TEST(ChatTemplate, RaiseExceptionReachesTheClientAsWrittenOtherErrorsNameTheTemplateLine) {
  auto t = ChatTemplate::FromString(
      "{% if messages[0].role != 'user' %}{{ raise_exception('First message must be from the user') }}{% endif "
      "%}\n{{ messages[0].content.upper() }}");
  ASSERT_TRUE(t.ok());
  auto r = t->Render(Inputs(ojson::parse(R"([{"role": "system", "content": "S"}])")));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "First message must be from the user");
  r = t->Render(Inputs(ojson::parse(R"([{"role": "user", "content": null}])")));
  EXPECT_EQ(r.status().message(), "chat template line 2: 'dict object' has no attribute 'content'");
}

TEST(ChatTemplate, NullValuedKeysAreDroppedFromMessages) {
  auto t = ChatTemplate::FromString(
      "{% for m in messages %}{{ m.content is defined }},{{ m.tool_calls is defined }};{% endfor %}");
  auto r = t->Render(Inputs(ojson::parse(R"([{"role": "assistant", "content": null, "tool_calls": null}])")));
  EXPECT_EQ(*r, "False,False;");
}

TEST(ChatTemplate, ReasoningFieldsAreAliasedAsTransformersDoes) {
  auto t = ChatTemplate::FromString("{% for m in messages %}{{ m | tojson }}\n{% endfor %}");
  auto r = t->Render(Inputs(ojson::parse(
      R"([{"role": "assistant", "content": "A", "reasoning": "R1"},
          {"role": "assistant", "reasoning_content": "R2", "content": "B"},
          {"role": "assistant", "content": "C", "thinking": "R3"}])")));
  EXPECT_EQ(*r,
            "{\"thinking\": \"R1\", \"role\": \"assistant\", \"content\": \"A\", \"reasoning\": \"R1\", "
            "\"reasoning_content\": \"R1\"}\n"
            "{\"thinking\": \"R2\", \"role\": \"assistant\", \"reasoning_content\": \"R2\", \"content\": \"B\"}\n"
            "{\"thinking\": \"R3\", \"role\": \"assistant\", \"content\": \"C\", \"reasoning_content\": \"R3\"}\n");
}

TEST(ChatTemplate, ToolsAndDocumentsAreNoneUnlessGiven) {
  auto t = ChatTemplate::FromString("{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }}");
  ChatRequestInputs in = Inputs(kUserHi);
  EXPECT_EQ(*t->Render(in), "True True True");
  in.tools = ojson::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  in.add_generation_prompt = false;
  EXPECT_EQ(*t->Render(in), "False True False");
}

TEST(ChatTemplate, ChatTemplateKwargsBecomeVariablesAndMayOverrideSpecialTokens) {
  auto t =
      ChatTemplate::FromString("{{ bos_token }}{{ 'think' if enable_thinking else 'fast' }}", {{"bos_token", "<s>"}});
  ChatRequestInputs in = Inputs(kUserHi);
  in.chat_template_kwargs = {{"enable_thinking", true}};
  EXPECT_EQ(*t->Render(in), "<s>think");
  in.chat_template_kwargs = {{"enable_thinking", false}, {"bos_token", ""}};
  EXPECT_EQ(*t->Render(in), "fast");
  in.chat_template_kwargs = {{"messages", ojson::array()}};
  EXPECT_EQ(t->Render(in).status().message(), "chat_template_kwargs may not set 'messages'");
}

TEST(ChatTemplate, ContinueFinalMessageEndsThePromptRightAfterItsContent) {
  auto t = ChatTemplate::ChatML();
  ChatRequestInputs in = Inputs(ojson::parse(
      R"([{"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Soft rain on"}])"));
  in.add_generation_prompt = false;
  in.continue_final_message = true;
  EXPECT_EQ(*t.Render(in), "<|im_start|>user\nWrite a haiku.<|im_end|>\n<|im_start|>assistant\nSoft rain on");
  in.messages[1]["content"] =
      ojson::parse(R"([{"type": "text", "text": "Part one. "}, {"type": "text", "text": "Soft"}])");
  auto parts = ChatTemplate::FromString(
      "{% for m in messages %}[{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{{ p.text "
      "| "
      "trim }}{% endfor %}{% endif %}]{% endfor %}");
  EXPECT_EQ(*parts->Render(in), "[Write a haiku.][Part one.Soft");  // the template trimmed the tag's space
}

TEST(ChatTemplate, ContinueFinalMessageNeedsAnAssistantMessageAndNoGenerationPrompt) {
  auto t = ChatTemplate::ChatML();
  ChatRequestInputs in = Inputs(kUserHi);
  in.continue_final_message = true;
  EXPECT_EQ(t.Render(in).status().message(), "continue_final_message and add_generation_prompt cannot both be set");
  in.add_generation_prompt = false;
  EXPECT_EQ(t.Render(in).status().message(),
            "continue_final_message needs the last message to be an assistant message");
  auto drops = ChatTemplate::FromString("{% for m in messages %}{{ m.role }}{% endfor %}{{ 'content' if false }}");
  in.messages = ojson::parse(R"([{"role": "assistant", "content": "abc"}])");
  EXPECT_EQ(drops->Render(in).status().message(),
            "continue_final_message is set but the chat template does not render the final message as given");
}

TEST(ChatTemplate, MalformedRequestsAreErrorsNotCrashes) {
  auto t = ChatTemplate::ChatML();
  EXPECT_EQ(t.Render(Inputs(ojson::object())).status().message(), "messages must be a list");
  EXPECT_EQ(t.Render(Inputs(ojson::array({1}))).status().message(), "messages[0] must be an object");
  ChatRequestInputs in = Inputs(kUserHi);
  in.chat_template_kwargs = ojson::array();
  EXPECT_EQ(t.Render(in).status().message(), "chat_template_kwargs must be an object");
  EXPECT_EQ(t.Render(Inputs(ojson::parse(R"([{"role": "user"}])"))).status().message(),
            "chat template line 1: 'dict object' has no attribute 'content'");
}

TEST(ChatTemplate, CopiesShareTheParsedTemplate) {
  auto t = ChatTemplate::FromString("{{ messages | length }}");
  ChatTemplate copy = *t;
  EXPECT_EQ(&copy.source(), &t->source());
  EXPECT_EQ(*copy.Render(Inputs(kUserHi)), "1");
}

TEST(ChatTemplate, RecognisesShippedChatMLAndRendersIt) {
  auto t = ChatTemplate::ForModelDir(std::string(LS_TEST_DATA_DIR) + "/tokenizer/gpt2_4096");
  ASSERT_TRUE(t.ok()) << t.status();
  auto s = t->Render({{"user", "Hi"}}, true);
  EXPECT_EQ(*s, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                "<|im_start|>assistant\n");
  auto plain = ChatTemplate::ChatML().Render({{"system", "S"}, {"user", "U"}}, false);
  EXPECT_EQ(*plain, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
}

}  // namespace
}  // namespace ls::chat
