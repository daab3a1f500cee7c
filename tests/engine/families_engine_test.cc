// The serving guarantees hold for every attention and FFN kind, not only this project's format:
// on checkpoints of several families (GQA with a sliding window, GQA with biases and a gated
// shared expert, MLA with its latent cache, KDA with its per-sequence state slots beside MLA),
// 32 requests batched with chunked prefills give each request's tokens alone (batch invariance),
// a pool small enough to preempt gives the same tokens, a prefix-cache hit gives the tokens
// computed without the cache (models with recurrent state resume from a state snapshot), and
// random cancellations leave no KV block or state slot behind.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/engine/checkpoint_engine.h"

namespace ls {
namespace {

class FamiliesEngine : public CheckpointEngineTest {
 protected:
  static std::vector<std::vector<int32_t>> RunAll(Engine& engine, const std::vector<Request>& reqs) {
    std::vector<std::vector<int32_t>> out;
    for (const RequestOutput& o : RunOutputs(engine, reqs)) {
      EXPECT_EQ(o.finish_reason, FinishReason::kLength) << o.error;
      out.push_back(o.token_ids);
    }
    return out;
  }
};

TEST_P(FamiliesEngine, BatchedRequestsGiveTheirTokensAlone) {
  std::mt19937 rng(11);
  std::vector<Request> reqs;
  for (int i = 0; i < 32; ++i) reqs.push_back(Req(absl::StrCat("r", i), Prompt(rng, 3 + (i * 7) % 30), 5 + i % 4));
  EngineConfig cfg;
  cfg.scheduler.max_num_batched_tokens = 40;  // chunked prefills mixed with decodes
  auto engine = MakeEngine(cfg);
  ASSERT_TRUE(engine);
  const auto batched = RunAll(*engine, reqs);
  EXPECT_EQ(engine->Metrics().kv_blocks_used, 0);
  engine.reset();
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto alone = MakeEngine();
    EXPECT_EQ(RunAll(*alone, {reqs[i]})[0], batched[i]) << "request " << i;
  }
}

TEST_P(FamiliesEngine, PreemptionGivesTheSameTokens) {
  std::mt19937 rng(3);
  std::vector<Request> reqs;
  // Long enough that the eight overlap however slowly they are submitted.
  for (int i = 0; i < 8; ++i) reqs.push_back(Req(absl::StrCat("p", i), Prompt(rng, 10 + i), 40));
  auto big = MakeEngine();
  const auto expected = RunAll(*big, reqs);
  big.reset();
  EngineConfig small;
  small.num_kv_blocks = 8;  // 128 token slots for 8 sequences of ~54 tokens
  small.enable_prefix_caching = false;
  auto engine = MakeEngine(small);
  EXPECT_EQ(RunAll(*engine, reqs), expected);
  EXPECT_GT(engine->Metrics().preemptions, 0u);
  EXPECT_EQ(engine->Metrics().kv_blocks_used, 0);
  EXPECT_EQ(engine->Metrics().state_slots_used, 0);
}

TEST_P(FamiliesEngine, PrefixCacheHitGivesTheUncachedTokens) {
  std::mt19937 rng(8);
  const std::vector<int32_t> prefix = Prompt(rng, 48);
  std::vector<int32_t> p1 = prefix, p2 = prefix, p3 = prefix;
  p1.push_back(7);
  p2.insert(p2.end(), {9, 10});
  p3.insert(p3.end(), {11, 12, 13});
  auto engine = MakeEngine();
  EXPECT_TRUE(engine->prefix_caching());
  std::vector<RequestOutput> outs;
  for (const auto& [id, p] : {std::pair{"a", p1}, std::pair{"b", p2}, std::pair{"c", p3}}) {
    OutputQueue q;
    ASSERT_TRUE(engine->Submit(Req(id, p, 6), q.Callback()).ok());
    outs.push_back(q.WaitFinal());
  }
  // A model with recurrent state resumes only where a snapshot was taken: the second prompt leaves
  // one where it leaves the first (48); the third resumes there.
  const bool recurrent = engine->num_state_slots() > 0;
  EXPECT_EQ(outs[1].cached_prompt_tokens, recurrent ? 0 : 48);
  EXPECT_EQ(outs[2].cached_prompt_tokens, 48);
  engine.reset();
  EngineConfig no_cache;
  no_cache.enable_prefix_caching = false;
  auto fresh = MakeEngine(no_cache);
  EXPECT_EQ(RunAll(*fresh, {Req("b", p2, 6)})[0], outs[1].token_ids);
  EXPECT_EQ(RunAll(*fresh, {Req("c", p3, 6)})[0], outs[2].token_ids);
}

TEST_P(FamiliesEngine, RandomCancellationsLeaveNoBlockOrSlotBehind) {
  std::mt19937 rng(9);
  EngineConfig cfg;
  cfg.num_kv_blocks = 24;  // small enough to preempt
  cfg.scheduler.max_num_seqs = 6;
  auto engine = MakeEngine(cfg);
  ASSERT_TRUE(engine);
  std::vector<std::unique_ptr<OutputQueue>> qs;
  for (int i = 0; i < 40; ++i) {
    qs.push_back(std::make_unique<OutputQueue>());
    ASSERT_TRUE(engine->Submit(Req(absl::StrCat("c", i), Prompt(rng, 5 + i % 23), 4 + i % 9), qs.back()->Callback()).ok());
    if (rng() % 3 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
      engine->Cancel(absl::StrCat("c", rng() % (i + 1)));
    }
  }
  for (auto& q : qs) {
    const RequestOutput o = q->WaitFinal();
    EXPECT_TRUE(o.finish_reason == FinishReason::kLength || o.finish_reason == FinishReason::kCancelled) << o.error;
  }
  const MetricsSnapshot m = engine->Metrics();
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.state_slots_used, 0);
  EXPECT_EQ(m.running + m.waiting, 0);
}

INSTANTIATE_TEST_SUITE_P(Transformers, FamiliesEngine,
                         ::testing::Values("hf/mixtral_bf16", "hf/qwen2_moe_f32", "hf/glm4_moe_f32",
                                           "hf/deepseek_v3_f32", "hf/kimi_linear_f32", "k3/k3_tiny_bf16"),
                         [](const auto& info) { return info.param.substr(3); });

}  // namespace
}  // namespace ls
