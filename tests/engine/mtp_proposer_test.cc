// Speculative decoding with the checkpoint's own multi-token-prediction layer: the proposer's
// drafts are the layer's greedy chain over the target's hidden rows (each chained row reading the
// last draft token and the layer's own hidden output), and after rejections they are those of a
// fresh proposer; through the engine, greedy output is token for token the output without
// speculation (alone, batched, under preemption and with prefix-cache hits), for DeepSeek-V3's and
// GLM-4-MoE's layers.
#include <gtest/gtest.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "engine/draft_model_proposer.h"
#include "tests/engine/checkpoint_engine.h"

namespace ls {
namespace {

int32_t Argmax(const float* row, int64_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

class MtpTest : public CheckpointEngineTest {
 protected:
  void SetUp() override {
    CheckpointEngineTest::SetUp();
    for (auto* m : {&mtp_, &reference_mtp_}) {
      auto loaded = LoadModel(testing::FixtureParamDir(GetParam()), &backend_, LoadOptions{.next_token_layer = true});
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      *m = std::move(*loaded);
    }
  }
  // The target's final hidden rows over `tokens` [len, d].
  std::vector<float> TargetHidden(const std::vector<int32_t>& tokens) {
    std::vector<float> hidden, logits;
    model_->CaptureHidden(&hidden);
    EXPECT_TRUE(model_->ForwardSequence(tokens, false, &logits).ok());
    model_->CaptureHidden(nullptr);
    return hidden;
  }
  // The layer's greedy chain of k tokens after `tokens`, computed here: rows first..len-2 over the
  // target's rows in one pass (a cache of their own), then one row per draft token over the
  // layer's own hidden output.
  std::vector<int32_t> ReferenceDraft(const std::vector<int32_t>& tokens, int32_t k, int32_t first = 0) {
    Model& mtp = *reference_mtp_;
    const int64_t d = mtp.config().hidden_size, V = mtp.config().vocab_size;
    const int32_t len = static_cast<int32_t>(tokens.size());
    KvCache cache(&backend_, mtp.kv_layout(), (len + k) / 16 + 2, 16, DType::kF32);
    std::vector<float> hidden, logits;
    mtp.CaptureHidden(&hidden);
    StepBatch b;
    b.tokens.assign(tokens.begin() + first + 1, tokens.end());
    b.prev_hidden = TargetHidden(std::vector<int32_t>(tokens.begin(), tokens.end() - 1));
    b.prev_hidden.erase(b.prev_hidden.begin(), b.prev_hidden.begin() + first * d);
    StepSequence s;
    s.num_tokens = len - 1 - first;
    for (int32_t i = 0; i < cache.num_blocks(); ++i) s.block_table.push_back(i);
    b.seqs = {s};
    std::vector<int32_t> draft;
    for (int32_t j = 0; j < k; ++j) {
      EXPECT_TRUE(mtp.Forward(b, cache, &logits).ok());
      draft.push_back(Argmax(logits.data(), V));
      b.prev_hidden.assign(hidden.end() - d, hidden.end());
      b.tokens = {draft.back()};
      b.seqs[0].start_pos += b.seqs[0].num_tokens;
      b.seqs[0].num_tokens = 1;
    }
    mtp.CaptureHidden(nullptr);
    return draft;
  }
  std::unique_ptr<DraftModelProposer> Make(int32_t blocks) {
    auto p = DraftModelProposer::Create(mtp_.get(), blocks, 4, DType::kF32, model_->config().vocab_size);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }
  // What the engine hands over after a step that computed tokens [from, to) of `tokens`.
  void Observe(DraftModelProposer& p, uint64_t seq, const std::vector<int32_t>& tokens, int32_t from, int32_t to) {
    const int64_t d = model_->config().hidden_size;
    const std::vector<float> hidden = TargetHidden(std::vector<int32_t>(tokens.begin(), tokens.begin() + to));
    p.ObserveHidden(seq, from, to - from, hidden.data() + from * d);
  }
  std::vector<int32_t> Draft(DraftModelProposer& p, uint64_t seq, const std::vector<int32_t>& tokens, int32_t k) {
    std::vector<int32_t> draft;
    std::vector<DraftQuery> qs = {{seq, &tokens, k, &draft}};
    EXPECT_TRUE(p.Propose(qs).ok());
    return draft;
  }

  std::unique_ptr<Model> mtp_, reference_mtp_;
};

TEST_P(MtpTest, DraftsAreTheLayersGreedyChainOverTheTargetsRows) {
  std::mt19937 rng(3);
  const std::vector<int32_t> prompt = Prompt(rng, 13);
  auto p = Make(32);
  EXPECT_TRUE(p->wants_hidden());
  EXPECT_TRUE(Draft(*p, 1, prompt, 3).empty()) << "no hidden row yet: no draft";
  Observe(*p, 1, prompt, 0, 12);  // the prompt's prefill, its last token not yet computed
  EXPECT_EQ(Draft(*p, 1, prompt, 3), ReferenceDraft(prompt, 3));
  p->Forget(1);
  EXPECT_EQ(p->num_free_blocks(), 32);
}

TEST_P(MtpTest, AfterRejectionsTheDraftIsAFreshProposersDraft) {
  std::mt19937 rng(5);
  std::vector<int32_t> seq = Prompt(rng, 9);
  auto p = Make(64);
  Observe(*p, 7, seq, 0, 8);
  for (int round = 0; round < 6; ++round) {
    const std::vector<int32_t> draft = Draft(*p, 7, seq, 3);
    ASSERT_EQ(draft, ReferenceDraft(seq, 3)) << "round " << round;
    // The target verifies the last token and the draft (rows at those positions, the rejected
    // ones among them), accepts part of it and samples a token of its own.
    std::vector<int32_t> verified = seq;
    verified.insert(verified.end(), draft.begin(), draft.end());
    const int32_t last = static_cast<int32_t>(seq.size()) - 1;
    Observe(*p, 7, verified, last, static_cast<int32_t>(verified.size()));
    const size_t take = round % (draft.size() + 1);
    seq.insert(seq.end(), draft.begin(), draft.begin() + take);
    seq.push_back(static_cast<int32_t>(rng() % model_->config().vocab_size));
  }
  p->Forget(7);
  EXPECT_EQ(p->num_free_blocks(), 64) << "every block comes back";
}

TEST_P(MtpTest, ALongPromptKeepsOnlyItsLastHiddenRows) {
  int differ = 0;  // prompts whose draft the cut changes: the test can tell the two apart
  for (unsigned seed = 0; seed < 5; ++seed) {
    std::mt19937 rng(seed);
    const std::vector<int32_t> prompt = Prompt(rng, 30);
    auto p = Make(32);
    p->set_max_pending_rows(6);
    Observe(*p, 1, prompt, 0, 12);  // the prompt in two chunks, 29 rows in all: the last 6 stay
    Observe(*p, 1, prompt, 12, 29);
    const std::vector<int32_t> cut = ReferenceDraft(prompt, 3, 29 - 6);
    EXPECT_EQ(Draft(*p, 1, prompt, 3), cut) << "seed " << seed;
    differ += cut != ReferenceDraft(prompt, 3);
  }
  EXPECT_GT(differ, 0);
}

TEST_P(MtpTest, WarmupKeepsNothing) {
  std::mt19937 rng(13);
  const std::vector<int32_t> a = Prompt(rng, 12);
  auto p = Make(700);
  ASSERT_TRUE(p->Warmup(8, 3).ok());
  EXPECT_EQ(p->num_free_blocks(), 700);
  Observe(*p, 1, a, 0, 11);
  EXPECT_EQ(Draft(*p, 1, a, 3), ReferenceDraft(a, 3));
}

TEST_P(MtpTest, GreedyOutputIsTheOutputWithout) {
  std::mt19937 rng(17);
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) {
    Request r = Req(absl::StrCat("m", i), Prompt(rng, 5 + 3 * i), 9 + 2 * i);
    r.params.logprobs = 1;
    reqs.push_back(std::move(r));
  }
  // Prefix-cache hits: two requests that repeat the first one's prompt and extend it.
  for (int i = 0; i < 2; ++i) {
    Request r = reqs[0];
    r.id = absl::StrCat("p", i);
    r.prompt_ids.insert(r.prompt_ids.end(), {static_cast<int32_t>(3 + i), 7, 11});
    reqs.push_back(std::move(r));
  }
  auto plain = MakeEngine();
  const auto want = RunOutputs(*plain, reqs);
  plain.reset();
  EngineConfig cfg;
  cfg.block_size = 4;
  cfg.speculative = {3, 1, 4, mtp_.get()};
  auto engine = MakeEngine(cfg);
  EXPECT_STREQ(engine->speculative_method(), "mtp");
  std::vector<RequestOutput> alone;
  for (const Request& r : reqs) alone.push_back(RunOutputs(*engine, {r})[0]);
  ExpectSameOutputs(alone, want);
  ExpectSameOutputs(RunOutputs(*engine, reqs), want);
  const MetricsSnapshot m = engine->Metrics();
  EXPECT_EQ(m.spec_method, "mtp");
  EXPECT_GT(m.spec_draft_tokens, 0u);
  EXPECT_GT(m.prefix_hit_requests, 0u);
  EXPECT_EQ(m.spec_propose_errors, 0u);
  EXPECT_EQ(m.kv_blocks_used, 0);
}

TEST_P(MtpTest, PreemptionKeepsTheOutput) {
  std::mt19937 rng(19);
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(Req(absl::StrCat("q", i), Prompt(rng, 6 + 2 * i), 12));
  auto plain = MakeEngine();
  const auto want = RunOutputs(*plain, reqs);
  plain.reset();
  EngineConfig cfg;
  cfg.speculative = {2, 1, 4, mtp_.get()};
  cfg.num_kv_blocks = 6;
  cfg.enable_prefix_caching = false;
  auto engine = MakeEngine(cfg);
  ExpectSameOutputs(RunOutputs(*engine, reqs), want);
  EXPECT_GT(engine->Metrics().preemptions, 0u);
  EXPECT_GT(engine->Metrics().spec_draft_tokens, 0u);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, MtpTest, ::testing::Values("hf/deepseek_v3_mtp_f32", "hf/glm4_moe_mtp_f32"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param.substr(3); });

}  // namespace
}  // namespace ls
