// Conformance with jinja2 as transformers configures it: every per-construct case of
// tests/data/chat_templates/unit_cases.json and every template x conversation of expected.json
// (both written by make_expected.py from jinja2) must render byte-identically, or fail where
// jinja2 fails, with the template's own message for raise_exception.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "gtest/gtest.h"
#include "jinja/template.h"
#include "nlohmann/json.hpp"

namespace ls::chat {
namespace {

using ojson = nlohmann::ordered_json;

std::string DataDir() { return std::string(LS_TEST_DATA_DIR) + "/chat_templates/"; }

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ojson ReadJson(const std::string& path) { return ojson::parse(ReadText(path)); }

std::string TestName(std::string s) {
  for (char& c : s)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

struct UnitCase {
  std::string name;
  ojson data;
};

std::vector<UnitCase> UnitCases() {
  std::vector<UnitCase> out;
  for (auto& c : ReadJson(DataDir() + "unit_cases.json")) out.push_back({c["name"].get<std::string>(), c});
  return out;
}

class JinjaUnitCase : public testing::TestWithParam<UnitCase> {};

TEST_P(JinjaUnitCase, RendersAsJinja2) {
  const ojson& c = GetParam().data;
  const std::string src = c["template"].get<std::string>();
  auto t = jinja::Template::Parse(src);
  if (c.contains("output")) {
    ASSERT_TRUE(t.ok()) << t.status() << "\ntemplate: " << src;
    auto out = t->Render(c["vars"]);
    ASSERT_TRUE(out.ok()) << out.status() << "\ntemplate: " << src;
    EXPECT_EQ(*out, c["output"].get<std::string>()) << "template: " << src;
    return;
  }
  if (c["phase"] == "load") {
    ASSERT_FALSE(t.ok()) << "jinja2 refuses to load it: " << c["error"] << "\ntemplate: " << src;
    // jinja2's own syntax errors carry the template line; a Python SyntaxError (a stray break
    // in the code jinja2 generates) does not.
    if (c["line"].is_number() && c["error"].get<std::string>().rfind("Template", 0) == 0) {
      const std::string line = "line " + std::to_string(c["line"].get<int>()) + ":";
      EXPECT_EQ(std::string(t.status().message()).substr(0, line.size()), line)
          << t.status() << " vs jinja2: " << c["error"];
    }
  } else if (t.ok()) {
    auto out = t->Render(c["vars"]);
    EXPECT_FALSE(out.ok()) << "rendered [" << *out << "] where jinja2 failed: " << c["error"] << "\ntemplate: " << src;
  }
}

INSTANTIATE_TEST_SUITE_P(Jinja2, JinjaUnitCase, testing::ValuesIn(UnitCases()),
                         [](const testing::TestParamInfo<UnitCase>& i) { return i.param.name; });

struct ChatCase {
  std::string tmpl, conv;
};

std::vector<ChatCase> ChatCases() {
  std::vector<ChatCase> out;
  const ojson expected = ReadJson(DataDir() + "expected.json");
  for (auto t = expected.begin(); t != expected.end(); ++t)
    for (auto c = t->begin(); c != t->end(); ++c) out.push_back({t.key(), c.key()});
  return out;
}

class ChatTemplateConformance : public testing::TestWithParam<ChatCase> {};

TEST_P(ChatTemplateConformance, RendersAsTransformers) {
  const ChatCase& p = GetParam();
  const ojson expected = ReadJson(DataDir() + "expected.json")[p.tmpl][p.conv];
  const ojson conv = ReadJson(DataDir() + "conversations/" + p.conv);
  SpecialTokens tokens;
  const ojson special = ReadJson(DataDir() + "special_tokens.json");
  for (auto it = special.begin(); it != special.end(); ++it)
    tokens.emplace_back(it.key(), it.value().get<std::string>());
  auto ct = ChatTemplate::FromString(ReadText(DataDir() + "templates/" + p.tmpl), tokens);
  ASSERT_TRUE(ct.ok()) << ct.status();

  ChatRequestInputs in;
  in.messages = conv["messages"];
  if (conv.contains("tools")) in.tools = conv["tools"];
  in.add_generation_prompt = conv.value("add_generation_prompt", true);
  in.continue_final_message = conv.value("continue_final_message", false);
  if (conv.contains("chat_template_kwargs")) in.chat_template_kwargs = conv["chat_template_kwargs"];
  auto out = ct->Render(in);
  if (expected.contains("output")) {
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*out, expected["output"].get<std::string>());
  } else {
    ASSERT_FALSE(out.ok()) << "rendered where transformers failed (" << expected["error"] << "):\n" << *out;
    if (expected["raised"].get<bool>()) {
      EXPECT_EQ(out.status().message(), expected["error"].get<std::string>());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transformers, ChatTemplateConformance, testing::ValuesIn(ChatCases()),
                         [](const testing::TestParamInfo<ChatCase>& i) {
                           return TestName(i.param.tmpl.substr(0, i.param.tmpl.size() - 6) + "__" +
                                           i.param.conv.substr(0, i.param.conv.size() - 5));
                         });

}  // namespace
}  // namespace ls::chat
