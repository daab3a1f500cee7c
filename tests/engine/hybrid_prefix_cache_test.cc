// Prefix caching for models with recurrent (KDA) layers, end to end on checkpoints written by
// transformers (Kimi-Linear) and by the K3 reference: a request resuming from a state snapshot
// (at a prompt's end inside a KV block, at a branch point, at an interval) gives the greedy tokens
// and the logprobs of a run without the cache; so it does with preemption, with snapshots evicted
// for lack of slots, and under a load of requests sharing prefixes of random lengths, after which
// no block or slot is left behind.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "tests/engine/checkpoint_engine.h"

namespace ls {
namespace {

class HybridPrefixCache : public CheckpointEngineTest {
 protected:
  std::unique_ptr<Engine> Cold() {
    EngineConfig cfg;
    cfg.enable_prefix_caching = false;
    return MakeEngine(cfg);
  }
  Request Req(const std::string& id, std::vector<int32_t> prompt, int32_t max_tokens) const {
    Request r = CheckpointEngineTest::Req(id, std::move(prompt), max_tokens);
    r.params.logprobs = 0;
    return r;
  }
  static RequestOutput RunOne(Engine& engine, const Request& r) {
    OutputQueue q;
    EXPECT_TRUE(engine.Submit(r, q.Callback()).ok());
    RequestOutput o = q.WaitFinal();
    EXPECT_EQ(o.finish_reason, FinishReason::kLength) << o.error;
    return o;
  }
  // Same tokens, and logprobs within the tolerance of a different prefill chunking.
  static void ExpectSame(const RequestOutput& got, const RequestOutput& cold, const std::string& what) {
    ASSERT_EQ(got.token_ids, cold.token_ids) << what;
    ASSERT_EQ(got.logprobs.size(), cold.logprobs.size()) << what;
    for (size_t i = 0; i < got.logprobs.size(); ++i)
      EXPECT_NEAR(got.logprobs[i].logprob, cold.logprobs[i].logprob, 2e-3) << what << " token " << i;
  }
};

TEST_P(HybridPrefixCache, NextTurnResumesAtThePreviousPromptsEndInsideABlock) {
  std::mt19937 rng(21);
  const std::vector<int32_t> turn1 = Prompt(rng, 70);  // ends 6 tokens into block 4 (block size 16)
  auto engine = MakeEngine();
  ASSERT_TRUE(engine->prefix_caching());
  EXPECT_GT(engine->num_snapshot_slots(), 0);
  const RequestOutput o1 = RunOne(*engine, Req("t1", turn1, 5));
  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), o1.token_ids.begin(), o1.token_ids.end());
  const std::vector<int32_t> user = Prompt(rng, 9);
  turn2.insert(turn2.end(), user.begin(), user.end());
  const RequestOutput o2 = RunOne(*engine, Req("t2", turn2, 6));
  EXPECT_EQ(o2.cached_prompt_tokens, 70);
  const MetricsSnapshot m = engine->Metrics();
  EXPECT_EQ(m.prefix_hit_requests, 1u);
  EXPECT_GE(m.snapshots_held, 2);
  auto cold = Cold();
  ExpectSame(o2, RunOne(*cold, Req("t2", turn2, 6)), "turn 2");
}

TEST_P(HybridPrefixCache, IntervalSnapshotsServeAPrefixNoEarlierPromptEndedAt) {
  std::mt19937 rng(22);
  EngineConfig cfg;
  cfg.state_snapshot_interval = 32;
  auto engine = MakeEngine(cfg);
  const std::vector<int32_t> a = Prompt(rng, 100);
  RunOne(*engine, Req("a", a, 3));
  std::vector<int32_t> b(a.begin(), a.begin() + 80);
  const std::vector<int32_t> rest = Prompt(rng, 7);
  b.insert(b.end(), rest.begin(), rest.end());
  const RequestOutput ob = RunOne(*engine, Req("b", b, 6));
  EXPECT_EQ(ob.cached_prompt_tokens, 64);
  auto cold = Cold();
  ExpectSame(ob, RunOne(*cold, Req("b", b, 6)), "b");
}

TEST_P(HybridPrefixCache, PreemptionAndEvictionKeepTheColdTokens) {
  std::mt19937 rng(23);
  const std::vector<int32_t> base = Prompt(rng, 90);
  std::vector<Request> reqs;
  for (int i = 0; i < 10; ++i) {
    std::vector<int32_t> p(base.begin(), base.begin() + 20 + 7 * i);
    const std::vector<int32_t> own = Prompt(rng, 3 + i % 4);
    p.insert(p.end(), own.begin(), own.end());
    reqs.push_back(Req(absl::StrCat("r", i), p, 30));  // long enough to overlap when submitted together
  }
  std::vector<RequestOutput> cold;
  {
    auto e = Cold();
    for (const Request& r : reqs) cold.push_back(RunOne(*e, r));
  }
  EngineConfig cfg;
  cfg.num_kv_blocks = 14;  // too few for all at once: preemptions, and snapshots giving blocks back
  cfg.scheduler.max_num_seqs = 4;
  cfg.state_cache_bytes = 3 * static_cast<int64_t>(Cold()->snapshot_slot_bytes());  // three snapshots
  cfg.state_snapshot_interval = 32;
  auto engine = MakeEngine(cfg);
  ASSERT_EQ(engine->num_snapshot_slots(), 3);
  // Half one at a time (hits), half all at once (preemptions).
  std::vector<RequestOutput> got;
  for (int i = 0; i < 5; ++i) got.push_back(RunOne(*engine, reqs[i]));
  const auto batch = RunOutputs(*engine, std::vector<Request>(reqs.begin() + 5, reqs.end()));
  got.insert(got.end(), batch.begin(), batch.end());
  for (size_t i = 0; i < reqs.size(); ++i) ExpectSame(got[i], cold[i], reqs[i].id);
  const MetricsSnapshot m = engine->Metrics();
  EXPECT_GT(m.prefix_hit_requests, 0u);
  EXPECT_GT(m.snapshot_evictions, 0);
  EXPECT_GT(m.preemptions, 0u);
  EXPECT_LE(m.snapshots_held, 3);
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.state_slots_used, 0);
}

TEST_P(HybridPrefixCache, RandomSharedPrefixesAreMostlyServedFromTheCache) {
  std::mt19937 rng(24);
  std::vector<std::vector<int32_t>> docs;
  for (int d = 0; d < 3; ++d) docs.push_back(Prompt(rng, 200));
  std::vector<Request> reqs;
  for (int i = 0; i < 24; ++i) {
    const auto& doc = docs[rng() % docs.size()];
    std::vector<int32_t> p(doc.begin(), doc.begin() + 20 + rng() % 170);
    const std::vector<int32_t> own = Prompt(rng, 2 + rng() % 6);
    p.insert(p.end(), own.begin(), own.end());
    reqs.push_back(Req(absl::StrCat("s", i), p, 2));
  }
  EngineConfig cfg;
  cfg.state_snapshot_interval = 64;
  auto engine = MakeEngine(cfg);
  std::vector<RequestOutput> got;
  for (const Request& r : reqs) got.push_back(RunOne(*engine, r));
  // Against an exact radix cache: each prompt's longest common start with an earlier one.
  int64_t cached = 0, radix = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    cached += got[i].cached_prompt_tokens;
    const auto& p = reqs[i].prompt_ids;
    size_t best = 0;
    for (size_t j = 0; j < i; ++j) {
      const auto& q = reqs[j].prompt_ids;
      size_t n = 0;
      while (n < p.size() - 1 && n < q.size() && p[n] == q[n]) ++n;
      best = std::max(best, n);
    }
    radix += static_cast<int64_t>(best);
  }
  EXPECT_GE(cached, radix * 7 / 10) << cached << " of " << radix << " tokens an exact radix cache would serve";
  auto cold = Cold();
  for (size_t i = 0; i < reqs.size(); i += 5) ExpectSame(got[i], RunOne(*cold, reqs[i]), reqs[i].id);
  EXPECT_EQ(engine->Metrics().kv_blocks_used, 0);
}

TEST_P(HybridPrefixCache, NoStateCacheMeansNoPrefixCaching) {
  EngineConfig cfg;
  cfg.state_cache_bytes = 0;
  auto engine = MakeEngine(cfg);
  EXPECT_FALSE(engine->prefix_caching());
  EXPECT_EQ(engine->num_snapshot_slots(), 0);
  cfg.state_cache_bytes = -1;
  cfg.state_snapshot_interval = 24;  // not a multiple of the block size
  cfg.kv_cache_dtype = DType::kF32;
  auto bad = Engine::Create(model_.get(), nullptr, cfg);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("state_snapshot_interval"), std::string::npos) << bad.status();
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, HybridPrefixCache, ::testing::Values("hf/kimi_linear_f32", "k3/k3_tiny_bf16"),
                         [](const auto& info) { return info.param.substr(3); });

}  // namespace
}  // namespace ls
