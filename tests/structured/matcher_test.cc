// The matcher over a real-looking vocabulary (tokens of several bytes, shared prefixes, control
// tokens without bytes): its cached masks equal a brute-force check of every token, end tokens
// are allowed exactly where the grammar may end, and several threads share one compiled grammar.
#include "structured/matcher.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "structured/json_schema.h"
#include "structured/regex.h"
#include "tests/structured/match_util.h"

namespace ls::structured {
namespace {

// Single bytes, then pieces a BPE vocabulary has: JSON punctuation runs, words, digits, spaces.
std::vector<std::string> TestVocab() {
  std::vector<std::string> v;
  v.push_back("");  // a control token (eos): no bytes
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"{\"", "\":", "\",", "\"}", "},", "}}", "[{", "\": \"", " \"", "name", "age", "true", "false",
                        "null", "12", "345", "0.", "\n  ", "  ", "    ", "ab", "abc", "aaa", "-1", "e+", "\\n", "\\u00",
                        "\xC3\xA9", "\xE4\xB8", "yes", "no", "Yes", " no", "\"yes\""})
    v.push_back(s);
  return v;
}

// The tokens whose bytes all go through from `state`, one by one.
TokenMask BruteMask(CompiledGrammar& g, int32_t state) {
  const TokenTrie& t = g.trie();
  TokenMask m((t.vocab_size() + 63) / 64, 0);
  for (int32_t id = 0; id < t.vocab_size(); ++id)
    if (g.NextToken(state, id) >= 0) m[id >> 6] |= uint64_t{1} << (id & 63);
  return m;
}

TEST(Matcher, MasksEqualABruteForceCheckAlongRandomOutputs) {
  const auto vocab = TestVocab();
  auto trie = std::make_shared<TokenTrie>(vocab);
  const auto schema = nlohmann::ordered_json::parse(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":120},
      "tags":{"type":"array","items":{"enum":["yes","no"]},"maxItems":3}},"required":["name","age"]})");
  auto grammar = JsonSchemaGrammar(schema);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  auto g = std::make_shared<CompiledGrammar>(*grammar, trie, "json");
  std::mt19937 rng(7);
  int finished = 0;
  for (int run = 0; run < 40; ++run) {
    Matcher m(g);
    int32_t state = g->Initial();
    for (int step = 0; step < 200 && !m.finished(); ++step) {
      const auto mask = g->Mask(state);
      ASSERT_EQ(*mask, BruteMask(*g, state)) << "run " << run << " step " << step;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < trie->vocab_size(); ++id)
        if (Allowed(*mask, id)) allowed.push_back(id);
      ASSERT_FALSE(allowed.empty());
      const int32_t tok = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.Accept(tok));
      state = g->NextToken(state, tok);
    }
    finished += m.finished();
  }
  EXPECT_GT(finished, 0);
  EXPECT_GT(g->num_masks(), 10u);
}

TEST(Matcher, MaskLogitsKeepsEndTokensOnlyWhereTheGrammarMayEnd) {
  const auto vocab = TestVocab();
  auto trie = std::make_shared<TokenTrie>(vocab);
  auto grammar = RegexGrammar("ab+");
  ASSERT_TRUE(grammar.ok());
  auto g = std::make_shared<CompiledGrammar>(*grammar, trie, "regex");
  Matcher m(g);
  const int32_t n = trie->vocab_size() + 3;  // the model's rows may outnumber the vocabulary
  std::vector<float> logits(n, 1.0f);
  ASSERT_TRUE(m.MaskLogits(logits.data(), n, {0}));
  EXPECT_TRUE(std::isinf(logits[0]));      // eos: "" is no match
  EXPECT_EQ(logits[1 + 'a'], 1.0f);
  EXPECT_TRUE(std::isinf(logits[1 + 'b']));
  EXPECT_TRUE(std::isinf(logits[n - 1]));  // past the vocabulary
  int32_t ab = -1, abc = -1;
  for (int32_t id = 0; id < trie->vocab_size(); ++id) {
    if (vocab[id] == "ab") ab = id;
    if (vocab[id] == "abc") abc = id;
  }
  EXPECT_EQ(logits[ab], 1.0f);
  EXPECT_TRUE(std::isinf(logits[abc]));
  EXPECT_FALSE(m.Accept(1 + 'b'));  // refused, and nothing changes
  ASSERT_TRUE(m.Accept(ab));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.finished());  // more b's may follow
  std::fill(logits.begin(), logits.end(), 2.0f);
  ASSERT_TRUE(m.MaskLogits(logits.data(), n, {0}));
  EXPECT_EQ(logits[0], 2.0f);  // may end now
  EXPECT_EQ(logits[1 + 'b'], 2.0f);
  EXPECT_TRUE(std::isinf(logits[1 + 'a']));
}

TEST(Matcher, FinishedWhereNothingCanFollow) {
  auto trie = std::make_shared<TokenTrie>(TestVocab());
  auto grammar = RegexGrammar("(yes|no)");
  ASSERT_TRUE(grammar.ok());
  auto g = std::make_shared<CompiledGrammar>(*grammar, trie, "choice");
  Matcher m(g);
  int32_t yes = -1;
  for (int32_t id = 0; id < trie->vocab_size(); ++id)
    if (trie->bytes(id) == "yes") yes = id;
  ASSERT_TRUE(m.Accept(yes));
  EXPECT_TRUE(m.finished());
  std::vector<float> logits(trie->vocab_size(), 0.0f);
  EXPECT_TRUE(m.MaskLogits(logits.data(), trie->vocab_size(), {0}));  // only the end token
  EXPECT_EQ(logits[0], 0.0f);
  EXPECT_TRUE(std::isinf(logits[1 + 'y']));
  std::vector<float> again(trie->vocab_size(), 0.0f);
  EXPECT_FALSE(m.MaskLogits(again.data(), trie->vocab_size(), {}));  // no end token: nothing may follow
}

TEST(Matcher, ThreadsShareOneCompiledGrammar) {
  auto trie = std::make_shared<TokenTrie>(TestVocab());
  auto grammar = JsonObjectGrammar();
  ASSERT_TRUE(grammar.ok());
  auto g = std::make_shared<CompiledGrammar>(*grammar, trie, "json_object");
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      Matcher m(g);
      std::vector<float> logits(trie->vocab_size());
      for (int step = 0; step < 300 && !m.finished(); ++step) {
        std::fill(logits.begin(), logits.end(), 0.0f);
        if (!m.MaskLogits(logits.data(), trie->vocab_size(), {})) return;
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < trie->vocab_size(); ++id)
          if (!std::isinf(logits[id])) allowed.push_back(id);
        if (!m.Accept(allowed[rng() % allowed.size()])) return;
      }
      ok[t] = 1;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(4, 1));
}

}  // namespace
}  // namespace ls::structured
