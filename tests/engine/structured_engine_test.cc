// Structured output in the engine on the shipped tiny model: constrained and free requests batched
// together, each constrained output a whole match that ends the request, and every request the
// same as when it runs alone (each sequence has its own matcher; masks apply per row), and the same
// with speculative decoding (by n-gram lookup and by a draft model) as without.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/registry.h"
#include "structured/output_constraint.h"
#include "structured/vocabulary.h"
#include "tokenizer/load_tokenizer.h"

namespace ls {
namespace {

using structured::OutputConstraint;

class StructuredEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir =
        std::filesystem::path(LS_TEST_DATA_DIR).parent_path().parent_path().string() + "/models/tiny";
    auto m = LoadModel(dir, &backend_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    auto t = tok::LoadTokenizerJsonFile(dir + "/tokenizer.json");
    ASSERT_TRUE(t.ok());
    tok_ = std::move(*t);
    cache_ =
        std::make_unique<structured::GrammarCache>(structured::VocabularyBytes(*tok_, model_->config().vocab_size));
  }
  std::shared_ptr<structured::CompiledGrammar> Grammar(OutputConstraint::Kind kind, std::string text,
                                                       std::vector<std::string> choices = {}) {
    auto g = cache_->Get(OutputConstraint{kind, std::move(text), std::move(choices)});
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : nullptr;
  }
  // Without the creation warm-up (EngineTest covers it): these tests create an engine per run.
  std::vector<RequestOutput> Run(const std::vector<Request>& rs, EngineConfig cfg = {},
                                 MetricsSnapshot* metrics = nullptr) {
    cfg.warmup = false;
    auto engine = Engine::Create(model_.get(), tok_.get(), cfg);
    EXPECT_TRUE(engine.ok());
    std::vector<std::unique_ptr<OutputQueue>> qs;
    for (const auto& r : rs) {
      qs.push_back(std::make_unique<OutputQueue>());
      EXPECT_TRUE((*engine)->Submit(r, qs.back()->Callback()).ok());
    }
    std::vector<RequestOutput> out;
    for (auto& q : qs) out.push_back(q->WaitFinal());
    if (metrics) *metrics = (*engine)->Metrics();
    return out;
  }
  Request Req(int i, std::shared_ptr<structured::CompiledGrammar> g) {
    Request r;
    r.id = absl::StrCat("r", i);
    r.prompt_ids = *tok_->Encode(absl::StrCat("And the LORD said unto Moses, ", i));
    r.params.temperature = 1.0f;
    r.params.seed = 100 + i;
    r.params.max_tokens = 120;
    r.params.grammar = std::move(g);
    return r;
  }
  CpuBackend backend_{2};
  std::unique_ptr<Model> model_;
  std::unique_ptr<tok::Tokenizer> tok_;
  std::unique_ptr<structured::GrammarCache> cache_;
};

// The byte-level vocabulary has a token for the raw byte 0xFF, the byte that marks special tokens
// in a grammar's view: it stands for nothing there, so text cannot spell a special marker out.
TEST_F(StructuredEngine, NoTokenButTheSpecialOnesCarriesTheSpecialTokenMark) {
  const std::vector<std::string> bytes = structured::VocabularyBytes(*tok_, model_->config().vocab_size);
  int raw_marks = 0, specials = 0;
  for (int32_t id = 0; id < tok_->vocab_size(); ++id) {
    std::string raw;
    tok_->AppendTokenBytes(id, /*skip_special=*/false, &raw);
    const bool marked = bytes[id].find('\xFF') != std::string::npos;
    if (tok_->IsSpecial(id)) {
      ++specials;
      EXPECT_EQ(bytes[id], structured::SpecialToken(raw)) << id;
    } else if (raw.find('\xFF') != std::string::npos) {
      ++raw_marks;
      EXPECT_EQ(bytes[id], "") << id;
    } else {
      EXPECT_FALSE(marked) << id;
      EXPECT_EQ(bytes[id], raw) << id;
    }
  }
  EXPECT_GE(raw_marks, 1) << "the tiny vocabulary has a raw 0xFF token: the case this guards";
  EXPECT_EQ(specials, 3);
}

TEST_F(StructuredEngine, ConstrainedAndFreeRequestsBatchTogetherAndEachMatchesItsRunAlone) {
  const std::string pattern = "[A-Z][a-z]{2,7}( [a-z]{1,8}){2,4}\\.";
  auto regex = Grammar(OutputConstraint::Kind::kRegex, pattern);
  auto choice = Grammar(OutputConstraint::Kind::kChoice, "", {"Moses", "Aaron", "the people of Israel"});
  std::vector<Request> reqs;
  for (int i = 0; i < 24; ++i) reqs.push_back(Req(i, i % 3 == 0 ? regex : i % 3 == 1 ? choice : nullptr));
  for (Request& r : reqs)
    if (!r.params.grammar) r.params.max_tokens = 20;
  const auto batched = Run(reqs);
  const std::regex re(pattern);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const RequestOutput& o = batched[i];
    if (i % 3 == 0) {
      EXPECT_EQ(o.finish_reason, FinishReason::kStop) << i << ": " << o.text;
      EXPECT_TRUE(std::regex_match(o.text, re)) << i << ": '" << o.text << "'";
    } else if (i % 3 == 1) {
      EXPECT_EQ(o.finish_reason, FinishReason::kStop) << i << ": " << o.text;
      EXPECT_TRUE(o.text == "Moses" || o.text == "Aaron" || o.text == "the people of Israel") << i << ": " << o.text;
    }
  }
  for (size_t i : {0, 1, 2, 9, 10, 11}) {
    const auto alone = Run({reqs[i]});
    EXPECT_EQ(alone[0].token_ids, batched[i].token_ids) << "request " << i;
  }
}

TEST_F(StructuredEngine, AGrammarEndsTheRequestEvenWithIgnoreEos) {
  Request r = Req(1, Grammar(OutputConstraint::Kind::kRegex, "(yes|no)"));
  r.params.ignore_eos = true;
  const auto out = Run({r});
  EXPECT_EQ(out[0].finish_reason, FinishReason::kStop);
  EXPECT_TRUE(out[0].text == "yes" || out[0].text == "no") << out[0].text;
}

TEST_F(StructuredEngine, JsonOutputParsesAndKeepsTheSchemasOrder) {
  auto g = Grammar(OutputConstraint::Kind::kJsonSchema,
                   R"({"type":"object","properties":{"zeta":{"type":"integer","minimum":0,"maximum":99},
                       "alpha":{"enum":["x","y"]}},"required":["zeta","alpha"]})");
  for (int i = 0; i < 4; ++i) {
    Request r = Req(i, g);
    r.params.max_tokens = 150;
    const auto out = Run({r});
    ASSERT_EQ(out[0].finish_reason, FinishReason::kStop) << out[0].text;
    const auto j = nlohmann::ordered_json::parse(out[0].text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out[0].text;
    ASSERT_EQ(j.size(), 2u);
    EXPECT_EQ(j.begin().key(), "zeta");
    EXPECT_TRUE(j["zeta"].is_number_integer() && j["zeta"].get<int>() >= 0 && j["zeta"].get<int>() <= 99);
    EXPECT_TRUE(j["alpha"] == "x" || j["alpha"] == "y");
  }
  EXPECT_GT(Run({Req(9, nullptr)})[0].token_ids.size(), 0u);
}

TEST_F(StructuredEngine, SpeculationKeepsTheConstrainedOutput) {
  // Greedy: the same tokens as without; the drafts, proposed without the grammar, are verified
  // against it row by row.
  const std::string pattern = "[A-Z][a-z]{2,7}( [a-z]{1,8}){2,6}\\.";
  auto regex = Grammar(OutputConstraint::Kind::kRegex, pattern);
  auto json = Grammar(OutputConstraint::Kind::kJsonSchema,
                      R"({"type":"object","properties":{"name":{"type":"string","maxLength":24},
                          "count":{"type":"integer"}},"required":["name","count"]})");
  std::vector<Request> reqs;
  for (int i = 0; i < 8; ++i) {
    Request r = Req(i, i % 2 ? json : regex);
    r.params.temperature = 0;
    reqs.push_back(std::move(r));
  }
  const auto want = Run(reqs);
  auto draft = LoadModel(std::filesystem::path(LS_TEST_DATA_DIR).parent_path().parent_path().string() + "/models/tiny",
                         &backend_);
  ASSERT_TRUE(draft.ok());
  for (Model* d : {static_cast<Model*>(nullptr), draft->get()}) {
    EngineConfig cfg;
    cfg.speculative = {3, 1, 4, d};
    MetricsSnapshot m;
    const auto got = Run(reqs, cfg, &m);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(got[i].token_ids, want[i].token_ids) << (d ? "draft model" : "n-gram") << ", request " << i;
      EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << got[i].text;
    }
    EXPECT_GT(m.spec_steps, 0u) << (d ? "draft model" : "n-gram");
    if (d) {
      EXPECT_GT(m.spec_accepted_tokens, 0u) << "the target's own greedy choice is often what the grammar allows";
    }
    EXPECT_GT(m.grammar_tokens, 0u);
  }
}

// The n-gram lookup proposes what followed each digit in the prompt, descending, where the grammar
// wants the digits ascending: those drafts are cut before the step, so none is proposed, and the
// output is the same.
TEST_F(StructuredEngine, DraftsStopBeforeWhatTheGrammarForbids) {
  auto ascending = Grammar(OutputConstraint::Kind::kRegex, "0123456789");
  Request r = Req(0, ascending);
  r.prompt_ids = *tok_->Encode("98765432109876543210987654321");
  r.params.temperature = 0;
  r.params.max_tokens = 30;
  const auto want = Run({r});
  EngineConfig cfg;
  cfg.speculative = {4, 1, 4};
  MetricsSnapshot m;
  const auto got = Run({r}, cfg, &m);
  EXPECT_EQ(got[0].token_ids, want[0].token_ids);
  EXPECT_EQ(got[0].text, "0123456789");
  EXPECT_EQ(m.spec_draft_tokens, 0u) << "every n-gram draft here leaves the grammar";
  // Free, the same prompt's continuation is proposed.
  r.params.grammar = nullptr;
  Run({r}, cfg, &m);
  EXPECT_GT(m.spec_draft_tokens, 0u);
}

}  // namespace
}  // namespace ls
