// Character classes over every code point: the added-token word and whitespace classes and
// Python's str.isspace against what the reference libraries do (tests/data/tokenizer/
// unicode_classes.json, written by models/reference/unicode_class_vectors.py), and Kimi's pattern
// rewritten for PCRE2 (no class intersection) against the intersection it replaces.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "nlohmann/json.hpp"
#include "tokenizer/regex.h"
#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace ls::tok {
namespace {

using json = nlohmann::json;

const json& Classes() {
  static const json* j = [] {
    std::ifstream in(std::string(LS_TEST_DATA_DIR) + "/tokenizer/unicode_classes.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return new json(json::parse(ss.str()));
  }();
  return *j;
}

std::set<uint32_t> OracleSet(const std::string& name) {
  std::set<uint32_t> out;
  for (const auto& r : Classes()[name])
    for (uint32_t c = r[0]; c <= r[1].get<uint32_t>(); ++c) out.insert(c);
  return out;
}

template <typename Pred>
std::set<uint32_t> Members(Pred pred) {
  std::set<uint32_t> out;
  for (uint32_t c = 0; c < 0x110000; ++c)
    if ((c < 0xd800 || c > 0xdfff) && pred(c)) out.insert(c);
  return out;
}

// The code points a one-character PCRE2 pattern matches.
std::set<uint32_t> RegexMembers(const std::string& pattern) {
  std::string text;
  std::vector<uint32_t> cp_at;  // by byte offset
  for (uint32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    const size_t before = text.size();
    AppendUtf8(c, &text);
    cp_at.resize(text.size(), c);
    (void)before;
  }
  auto re = Regex::Compile(pattern);
  EXPECT_TRUE(re.ok()) << re.status();
  std::set<uint32_t> out;
  for (auto [b, e] : (*re)->FindAll(text)) {
    EXPECT_EQ(e - b, text.size() > b ? [&] { size_t i = b; NextCodePoint(text, &i); return i - b; }() : 0u);
    out.insert(cp_at[b]);
  }
  return out;
}

void ExpectSameSets(const std::set<uint32_t>& got, const std::set<uint32_t>& want, const std::string& what) {
  std::vector<uint32_t> extra, missing;
  for (uint32_t c : got)
    if (!want.count(c)) extra.push_back(c);
  for (uint32_t c : want)
    if (!got.count(c)) missing.push_back(c);
  EXPECT_TRUE(extra.empty() && missing.empty())
      << what << ": " << extra.size() << " extra (first U+" << std::hex << (extra.empty() ? 0 : extra[0]) << "), "
      << std::dec << missing.size() << " missing (first U+" << std::hex << (missing.empty() ? 0 : missing[0]) << ")";
}

TEST(UnicodeClasses, WordCharactersAreTheOnesThatBlockSingleWordTokens) {
  ExpectSameSets(Members(IsWordChar), OracleSet("hf_word"), "IsWordChar vs HF single_word");
}

TEST(UnicodeClasses, WhiteSpaceIsWhatLstripSwallows) {
  ExpectSameSets(Members(IsWhiteSpace), OracleSet("hf_space"), "IsWhiteSpace vs HF lstrip");
}

TEST(UnicodeClasses, PythonSpaceIsStrIsspace) {
  ExpectSameSets(Members(IsPythonSpace), OracleSet("python_space"), "IsPythonSpace vs str.isspace");
}

TEST(KimiPattern, ClassRewritesEqualTheIntersectionsTheyReplace) {
  // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{sc:Han}]] and [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{sc:Han}]], spelled with a
  // lookahead.
  ExpectSameSets(RegexMembers(R"([^\p{sc:Han}\p{Ll}\p{N}\p{P}\p{S}\p{Z}\p{C}])"),
                 RegexMembers(R"((?!\p{sc:Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])"), "upper-case arm class");
  ExpectSameSets(RegexMembers(R"([^\p{sc:Han}\p{Lu}\p{Lt}\p{N}\p{P}\p{S}\p{Z}\p{C}])"),
                 RegexMembers(R"((?!\p{sc:Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])"), "lower-case arm class");
  ExpectSameSets(RegexMembers(R"([\t-\r\x{85}\p{Z}])"), Members(IsWhiteSpace), "White_Space");
}

// PCRE2 10.42 has Unicode 14 tables, tiktoken's regex engine Unicode 16. The classes Kimi's pattern
// uses must agree on every code point PCRE2 has assigned; characters added in Unicode 15 and 16
// (CJK Extensions H and I, Kawi, Egyptian hieroglyph extensions, ...) are unassigned to PCRE2 and
// split as other symbols would be. This pins that the difference is only that.
TEST(KimiPattern, PcreClassesDifferFromTiktokensOnlyOnCharactersNewerThanItsTables) {
  const std::set<uint32_t> unassigned = RegexMembers(R"(\p{Cn})");
  const std::pair<const char*, const char*> classes[] = {{"Han", R"(\p{sc:Han})"}, {"L", R"(\p{L})"},
                                                         {"Lu", R"(\p{Lu})"},      {"Ll", R"(\p{Ll})"},
                                                         {"Lt", R"(\p{Lt})"},      {"Lm", R"(\p{Lm})"},
                                                         {"Lo", R"(\p{Lo})"},      {"M", R"(\p{M})"},
                                                         {"N", R"(\p{N})"},        {"space", R"([\t-\r\x{85}\p{Z}])"}};
  for (auto [name, pcre] : classes) {
    const std::set<uint32_t> ours = RegexMembers(pcre), theirs = OracleSet(std::string("tiktoken_") + name);
    std::set<uint32_t> ours_assigned_only, theirs_assigned_only;
    for (uint32_t c : ours)
      if (!unassigned.count(c)) ours_assigned_only.insert(c);
    for (uint32_t c : theirs)
      if (!unassigned.count(c)) theirs_assigned_only.insert(c);
    ExpectSameSets(ours_assigned_only, theirs_assigned_only,
                   std::string("\\p{") + name + "} on PCRE2-assigned code points");
    for (uint32_t c : ours) EXPECT_TRUE(theirs.count(c)) << name << " U+" << std::hex << c;
  }
}

}  // namespace
}  // namespace ls::tok
