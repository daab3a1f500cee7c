// The Engine end to end on a fixture model: batch invariance of 32 concurrent greedy requests,
// seeded sampling alone vs batched, preemption with a small KV pool, the prefix cache,
// cancellation, admission errors and the KV cache's type. (Its expert balancing:
// expert_balancing_engine_test.cc.)
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/sampler.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/engine/checkpoint_engine.h"
#include "tests/engine/engine_fixture.h"
#include "tests/test_util.h"
#include "tokenizer/load_tokenizer.h"

namespace ls {
namespace {

TEST_F(EngineTest, ConcurrentGreedyRequestsEqualEachAlone) {
  std::mt19937 rng(11);
  std::vector<Request> reqs;
  for (int i = 0; i < 32; ++i) reqs.push_back(Req(absl::StrCat("r", i), Prompt(rng, 1 + (i * 7) % 40), 6 + i % 7));
  EngineConfig cfg;
  cfg.scheduler.max_num_batched_tokens = 96;  // forces chunked prefills mixed with decodes
  auto engine = MakeEngine(cfg);
  auto batched = RunAll(*engine, reqs);
  EXPECT_EQ(engine->Metrics().kv_blocks_used, 0);
  engine.reset();  // one engine per model at a time
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto alone = MakeEngine();
    EXPECT_EQ(RunAll(*alone, {reqs[i]})[0], batched[i]) << "request " << i;
  }
}

TEST_F(EngineTest, SeededSamplingIsTheSameAloneAndBatched) {
  std::mt19937 rng(5);
  std::vector<Request> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back(Req(absl::StrCat("s", i), Prompt(rng, 5 + i), 10, 0.8f, 100 + i));
  reqs[3].params.top_p = 0.9f;
  reqs[4].params.top_k = 20;
  auto engine = MakeEngine();
  auto batched = RunAll(*engine, reqs);
  engine.reset();
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto alone = MakeEngine();
    EXPECT_EQ(RunAll(*alone, {reqs[i]})[0], batched[i]) << "request " << i;
  }
  // Different seeds give different streams (with overwhelming probability).
  auto e = MakeEngine();
  Request other = reqs[0];
  other.params.seed = 999;
  EXPECT_NE(RunAll(*e, {other})[0], batched[0]);
}

TEST_F(EngineTest, PreemptionWithASmallPoolGivesTheSameOutputs) {
  std::mt19937 rng(3);
  std::vector<Request> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back(Req(absl::StrCat("p", i), Prompt(rng, 10 + i), 20));
  auto big = MakeEngine();
  auto expected = RunAll(*big, reqs);
  big.reset();
  EngineConfig small;
  small.num_kv_blocks = 12;  // 192 token slots for 12 sequences of ~40 tokens
  small.enable_prefix_caching = false;
  auto engine = MakeEngine(small);
  auto got = RunAll(*engine, reqs);
  EXPECT_EQ(got, expected);
  EXPECT_GT(engine->Metrics().preemptions, 0u);
  EXPECT_EQ(engine->Metrics().kv_blocks_used, 0);
}

TEST_F(EngineTest, PrefixCacheComputesOnlyTheNewTokens) {
  std::mt19937 rng(8);
  std::vector<int32_t> prefix = Prompt(rng, 64);
  std::vector<int32_t> p1 = prefix, p2 = prefix;
  p1.push_back(7);
  p2.push_back(9);
  p2.push_back(10);
  auto engine = MakeEngine();
  OutputQueue q1;
  ASSERT_TRUE(engine->Submit(Req("a", p1, 4), q1.Callback()).ok());
  RequestOutput o1 = q1.WaitFinal();
  EXPECT_EQ(o1.cached_prompt_tokens, 0);
  OutputQueue q2;
  ASSERT_TRUE(engine->Submit(Req("b", p2, 4), q2.Callback()).ok());
  RequestOutput o2 = q2.WaitFinal();
  EXPECT_EQ(o2.cached_prompt_tokens, 64) << "4 full blocks of 16 shared";
  EXPECT_EQ(engine->Metrics().prefix_hit_tokens, 64);
  engine.reset();
  EngineConfig no_cache;
  no_cache.enable_prefix_caching = false;
  auto fresh = MakeEngine(no_cache);
  EXPECT_EQ(RunAll(*fresh, {Req("b", p2, 4)})[0], o2.token_ids);
}

// Prompt logprobs: computed over chunked prefills, for a prompt whose blocks are in the prefix
// cache (they are computed anyway), equal the log-softmax of one forward pass over the prompt.
TEST_F(EngineTest, PromptLogprobsBypassThePrefixCacheAndMatchOneForwardPass) {
  std::mt19937 rng(21);
  const std::vector<int32_t> prompt = Prompt(rng, 70);
  std::vector<float> want;
  ASSERT_TRUE(model_->ForwardSequence(prompt, /*all_logits=*/true, &want).ok());
  const int32_t V = static_cast<int32_t>(model_->config().vocab_size);
  EngineConfig cfg;
  cfg.scheduler.max_num_batched_tokens = 24;  // the prompt arrives in chunks of 24, 24, 22
  cfg.kv_cache_dtype = DType::kF32;            // as ForwardSequence's own cache
  auto engine = MakeEngine(cfg);
  EXPECT_EQ(RunAll(*engine, {Req("warm", prompt, 2)}).size(), 1u);  // fills the prefix cache
  Request r = Req("p", prompt, 3);
  r.params.prompt_logprobs = 2;
  OutputQueue q;
  ASSERT_TRUE(engine->Submit(r, q.Callback()).ok());
  const RequestOutput first = q.Next();
  ASSERT_EQ(first.prompt_logprobs.size(), prompt.size() - 1) << "delivered whole with the first output";
  RequestOutput rest = q.WaitFinal();
  EXPECT_TRUE(rest.prompt_logprobs.empty());
  EXPECT_EQ(rest.cached_prompt_tokens, 0);
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    const TokenLogprob& lp = first.prompt_logprobs[i];
    const TokenLogprob ref = Sampler::Logprobs(want.data() + i * V, V, prompt[i + 1], 2);
    EXPECT_EQ(lp.token_id, prompt[i + 1]);
    EXPECT_NEAR(lp.logprob, ref.logprob, 1e-4) << "position " << i;
    ASSERT_EQ(lp.top.size(), 2u);
    EXPECT_EQ(lp.top[0].first, ref.top[0].first) << "position " << i;
    EXPECT_NEAR(lp.top[1].second, ref.top[1].second, 1e-4);
  }
  // The tokens are those of a request without prompt logprobs, and the cache still serves others.
  std::vector<int32_t> tokens = first.token_ids;
  tokens.insert(tokens.end(), rest.token_ids.begin(), rest.token_ids.end());
  EXPECT_EQ(RunAll(*engine, {Req("again", prompt, 3)})[0], tokens);
  EXPECT_EQ(engine->Metrics().prefix_hit_tokens, 64) << "the first request's 4 full blocks, reused by 'again' alone";
}

// Prompt logprobs survive preemption (the prompt is recomputed) and do not change the tokens.
TEST_F(EngineTest, PromptLogprobsWithPreemptionEqualThoseWithoutIt) {
  std::mt19937 rng(5);
  std::vector<Request> reqs;
  for (int i = 0; i < 10; ++i) {
    reqs.push_back(Req(absl::StrCat("q", i), Prompt(rng, 12 + i), 20));
    reqs.back().params.prompt_logprobs = 1;
  }
  auto collect = [&](Engine& e) {
    std::vector<std::unique_ptr<OutputQueue>> qs;
    for (const auto& r : reqs) {
      qs.push_back(std::make_unique<OutputQueue>());
      EXPECT_TRUE(e.Submit(r, qs.back()->Callback()).ok());
    }
    std::vector<RequestOutput> out;
    for (auto& q : qs) out.push_back(q->WaitFinal());
    return out;
  };
  EngineConfig big_cfg;
  big_cfg.kv_cache_dtype = DType::kF32;
  auto big = MakeEngine(big_cfg);
  const auto expected = collect(*big);
  big.reset();
  EngineConfig small = big_cfg;
  small.num_kv_blocks = 12;
  auto engine = MakeEngine(small);
  const auto got = collect(*engine);
  EXPECT_GT(engine->Metrics().preemptions, 0u);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].token_ids, expected[i].token_ids) << i;
    ASSERT_EQ(got[i].prompt_logprobs.size(), reqs[i].prompt_ids.size() - 1) << i;
    for (size_t j = 0; j < got[i].prompt_logprobs.size(); ++j)
      EXPECT_NEAR(got[i].prompt_logprobs[j].logprob, expected[i].prompt_logprobs[j].logprob, 1e-4) << i << " " << j;
  }
}

// logit_bias moves the greedy choice: +100 on one token makes it every output token, and -100
// on the unbiased greedy first token makes another come first. Logprobs stay those of the model.
TEST_F(EngineTest, LogitBiasChangesGreedyTokensButNotLogprobs) {
  std::mt19937 rng(9);
  const std::vector<int32_t> prompt = Prompt(rng, 10);
  auto engine = MakeEngine();
  const auto plain = RunAll(*engine, {Req("plain", prompt, 4)})[0];
  Request forced = Req("forced", prompt, 4);
  forced.params.logit_bias = {{123, 100.f}};
  forced.params.logprobs = 0;
  OutputQueue q;
  ASSERT_TRUE(engine->Submit(forced, q.Callback()).ok());
  RequestOutput o = q.WaitFinal();
  EXPECT_EQ(o.token_ids, std::vector<int32_t>(4, 123));
  ASSERT_EQ(o.logprobs.size(), 4u);
  EXPECT_LT(o.logprobs[0].logprob, -0.5f) << "the model's own probability of token 123, not the biased one";
  Request avoided = Req("avoided", prompt, 4);
  avoided.params.logit_bias = {{plain[0], -100.f}};
  EXPECT_NE(RunAll(*engine, {avoided})[0][0], plain[0]);
  Request bad = Req("bad", prompt, 4);
  bad.params.logit_bias = {{static_cast<int32_t>(model_->config().vocab_size), 1.f}};
  EXPECT_NE(engine->Submit(bad, q.Callback()).message().find("logit_bias: token id"), std::string::npos);
  bad.params.logit_bias = {{5, 101.f}};
  EXPECT_NE(engine->Submit(bad, q.Callback()).message().find("[-100, 100]"), std::string::npos);
}

TEST_F(EngineTest, CancelFreesBlocksAndReportsCancelled) {
  auto engine = MakeEngine();
  OutputQueue q;
  ASSERT_TRUE(engine->Submit(Req("c", {5, 6, 7}, 400), q.Callback()).ok());
  RequestOutput first = q.Next();
  EXPECT_EQ(first.token_ids.size(), 1u);
  engine->Cancel("c");
  RequestOutput o;
  do o = q.Next();
  while (!o.finished());
  EXPECT_EQ(o.finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(o.error, "");  // the client's own cancellation carries no reason
  EXPECT_EQ(engine->num_live_requests(), 0u);
  EXPECT_EQ(engine->Metrics().kv_blocks_used, 0);
}

// Two client threads submit 160 requests (shared prefixes, random lengths, priorities and stop
// tokens, a KV pool small enough to preempt) and cancel a third of them at random moments: before
// the engine sees them, after some outputs, or after they finished. Every request gets exactly one
// final output and nothing is left behind: no live request, no KV block in use.
TEST_F(EngineTest, RandomCancellationsLeaveNothingBehind) {
  EngineConfig cfg;
  cfg.num_kv_blocks = 24;  // 384 token slots for up to 64 sequences of up to ~100 tokens: preemptions
  cfg.scheduler.max_num_batched_tokens = 64;
  auto engine = MakeEngine(cfg);
  constexpr int kThreads = 2, kPerThread = 80;
  std::atomic<int> finals{0}, extra_outputs{0};
  auto client = [&](int t) {
    std::mt19937 rng(100 + t);
    std::vector<int32_t> shared = Prompt(rng, 40);
    struct Live {
      std::string id;
      std::unique_ptr<OutputQueue> q;
      bool finished = false;  // its final output was taken early
    };
    std::vector<Live> live;
    for (int i = 0; i < kPerThread; ++i) {
      std::vector<int32_t> prompt(shared.begin(), shared.begin() + rng() % 40);
      for (int32_t tok : Prompt(rng, 1 + rng() % 20)) prompt.push_back(tok);
      Request r = Req(absl::StrCat("t", t, "-", i), prompt, 1 + static_cast<int32_t>(rng() % 60));
      r.priority = static_cast<int32_t>(rng() % 3);
      if (rng() % 4 == 0) r.params.stop_token_ids = {static_cast<int32_t>(3 + rng() % 500)};
      live.push_back({r.id, std::make_unique<OutputQueue>()});
      ASSERT_TRUE(engine->Submit(r, live.back().q->Callback()).ok());
      if (rng() % 3 == 0) {
        // Cancel this one or an earlier one, now or after one of its outputs.
        Live& victim = live[rng() % live.size()];
        if (rng() % 2 && !victim.finished) {
          std::optional<RequestOutput> o = victim.q->NextFor(std::chrono::milliseconds(20));
          victim.finished = o && o->finished();
        }
        engine->Cancel(victim.id);
      }
      if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 5));
    }
    for (Live& l : live) {
      if (l.finished) {
        ++finals;
        continue;
      }
      RequestOutput o = l.q->WaitFinal();
      EXPECT_TRUE(o.finish_reason == FinishReason::kLength || o.finish_reason == FinishReason::kStop ||
                  o.finish_reason == FinishReason::kCancelled) << l.id << ": " << o.error;
      ++finals;
      // Nothing follows a final output.
      if (l.q->NextFor(std::chrono::milliseconds(0))) ++extra_outputs;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(client, t);
  for (auto& th : threads) th.join();
  EXPECT_EQ(finals.load(), kThreads * kPerThread);
  EXPECT_EQ(extra_outputs.load(), 0);
  EXPECT_EQ(engine->num_live_requests(), 0u);
  const MetricsSnapshot m = engine->Metrics();
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.running, 0);
  EXPECT_EQ(m.waiting, 0);
  EXPECT_GT(m.finished[2], 0u);  // some were cancelled
  EXPECT_GT(m.preemptions, 0u);   // the pool was small enough to preempt
  EXPECT_GT(m.prefix_hit_tokens, 0);  // and prompts shared cached prefixes
}

TEST_F(EngineTest, AdmissionErrorsNameTheProblem) {
  EngineConfig cfg;
  cfg.max_waiting = 2;
  auto engine = MakeEngine(cfg);
  OutputQueue q;
  EXPECT_EQ(engine->Submit(Req("e", {}, 4), q.Callback()).message(), "prompt must not be empty");
  EXPECT_NE(engine->Submit(Req("e", {1, 100000}, 4), q.Callback()).message().find("outside the vocabulary"),
            std::string::npos);
  auto long_req = Req("e", std::vector<int32_t>(500, 1), 100);
  auto st = engine->Submit(long_req, q.Callback());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("context length of 512"), std::string::npos) << st;
  auto bad = Req("e", {1}, 4);
  bad.params.top_p = 0;
  EXPECT_NE(engine->Submit(bad, q.Callback()).message().find("top_p"), std::string::npos);
  EXPECT_EQ(engine->Metrics().rejected, 4u);
}

// The creation warm-up fills the largest step the scheduler could plan as far as the KV blocks
// allow, records no expert load, and leaves nothing behind that changes what requests get.
TEST_F(EngineTest, WarmupFillsTheLargestStepWithinTheCacheAndChangesNothing) {
  EngineConfig cfg;
  cfg.scheduler.max_num_batched_tokens = 100;
  cfg.scheduler.max_num_seqs = 3;
  cfg.num_kv_blocks = 4;  // 64 tokens: sequences of 22 tokens take two blocks each, so two fit
  auto engine = MakeEngine(cfg);
  EXPECT_EQ(engine->warmup_tokens(), 44);
  for (int64_t c : model_->expert_token_counts()) ASSERT_EQ(c, 0);
  EXPECT_NE(engine->ExpertLoadJson().find("\"window_steps\": 0"), std::string::npos) << engine->ExpertLoadJson();
  std::mt19937 rng(5);
  std::vector<Request> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back(Req(absl::StrCat("w", i), Prompt(rng, 5 + 3 * i), 6));
  const auto warm = RunAll(*engine, reqs);
  engine.reset();
  cfg.warmup = false;
  engine = MakeEngine(cfg);
  EXPECT_EQ(engine->warmup_tokens(), 0);
  EXPECT_EQ(RunAll(*engine, reqs), warm);
  engine.reset();
  cfg = {};  // defaults: 2048 tokens over 64 sequences of 32
  engine = MakeEngine(cfg);
  EXPECT_EQ(engine->warmup_tokens(), 2048);
}

TEST_F(EngineTest, SubmitAllQueuesEveryRequestOrNone) {
  EngineConfig cfg;
  cfg.max_waiting = 3;
  auto engine = MakeEngine(cfg);
  auto batch = [&](const std::vector<std::string>& ids, std::vector<std::unique_ptr<OutputQueue>>* qs) {
    std::vector<Request> reqs;
    for (const std::string& id : ids) reqs.push_back(Req(id, {1, 2, 3}, 4));
    return SubmitTogether(*engine, std::move(reqs), qs);
  };
  std::vector<std::unique_ptr<OutputQueue>> qs;
  const absl::Status too_many = batch({"a", "b", "c", "d"}, &qs);
  EXPECT_TRUE(absl::IsInvalidArgument(too_many)) << "more than the queue holds: never, not later";
  EXPECT_NE(too_many.message().find("4 sequences"), std::string::npos) << too_many;
  EXPECT_NE(too_many.message().find("could never be queued"), std::string::npos) << too_many;
  EXPECT_TRUE(absl::IsAlreadyExists(batch({"a", "b", "a"}, &qs))) << "an id twice";
  EXPECT_EQ(engine->num_live_requests(), 0u) << "a refused batch queues nothing";
  qs.clear();
  ASSERT_TRUE(batch({"a", "b", "c"}, &qs).ok());
  for (auto& q : qs) EXPECT_EQ(q->WaitFinal().token_ids.size(), 4u);
}

TEST_F(EngineTest, FullQueueAndDuplicateIdsAreRefused) {
  EngineConfig cfg;
  cfg.max_waiting = 3;
  cfg.scheduler.max_num_seqs = 1;
  auto engine = MakeEngine(cfg);
  std::vector<std::unique_ptr<OutputQueue>> qs;
  int accepted = 0, exhausted = 0;
  std::vector<bool> was_accepted;
  for (int i = 0; i < 10; ++i) {
    qs.push_back(std::make_unique<OutputQueue>());
    absl::Status st = engine->Submit(Req(absl::StrCat("q", i), {1, 2, 3}, 500), qs.back()->Callback());
    was_accepted.push_back(st.ok());
    accepted += st.ok();
    exhausted += absl::IsResourceExhausted(st);
  }
  // One request runs and three wait; the others are refused unless requests of 500 tokens
  // finished while the loop submitted (a loaded machine can pause this thread that long, so
  // only some refusals are required).
  EXPECT_GE(accepted, 3);
  EXPECT_GE(exhausted, 1);
  EXPECT_EQ(accepted + exhausted, 10);
  EXPECT_TRUE(absl::IsAlreadyExists(engine->Submit(Req("q0", {1}, 2), qs[0]->Callback())));
  // One sequence runs at a time: with two or more live, the drain must cancel at least one.
  const size_t live_before_drain = engine->num_live_requests();
  EXPECT_FALSE(engine->Drain(std::chrono::milliseconds(0)));
  EXPECT_EQ(engine->num_live_requests(), 0u);
  // Requests the drain cancelled say why (some may have finished while others were submitted).
  int cancelled = 0;
  for (int i = 0; i < 10; ++i) {
    if (!was_accepted[i]) continue;
    RequestOutput final = qs[i]->WaitFinal();
    if (final.finish_reason != FinishReason::kCancelled) continue;
    ++cancelled;
    EXPECT_NE(final.error.find("shutting down"), std::string::npos) << final.error;
  }
  if (live_before_drain >= 2) {
    EXPECT_GE(cancelled, 1);
  }
  EXPECT_TRUE(absl::IsUnavailable(engine->Submit(Req("late", {1}, 2), qs[0]->Callback())));
}

TEST_F(EngineTest, MaxModelLenBeyondTheModelOrNegativeIsRefused) {
  const int64_t model_max = model_->config().max_position_embeddings;
  EngineConfig too_long;
  too_long.max_model_len = static_cast<int32_t>(model_max + 1);
  auto e = Engine::Create(model_.get(), nullptr, too_long);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("exceeds the model's max_position_embeddings"), std::string::npos)
      << e.status();
  EngineConfig negative;
  negative.max_model_len = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(Engine::Create(model_.get(), nullptr, negative).status()));
  EngineConfig shorter;
  shorter.max_model_len = static_cast<int32_t>(model_max / 2);
  auto ok = Engine::Create(model_.get(), nullptr, shorter);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->max_model_len(), model_max / 2);
}

// The KV cache holds BF16 for a BF16 checkpoint on the CPU backend (twice the blocks in the same
// bytes), float32 when asked or for a float32 checkpoint, and refuses a type attention lacks.
TEST_F(EngineTest, KvCacheDTypeFollowsTheCheckpointUnlessAsked) {
  EngineConfig cfg;
  cfg.kv_cache_bytes = size_t{8} << 20;
  auto by_default = MakeEngine(cfg);
  EXPECT_EQ(by_default->kv_cache_dtype(), DType::kBF16);
  cfg.kv_cache_dtype = DType::kF32;
  auto f32 = MakeEngine(cfg);
  EXPECT_EQ(f32->kv_cache_dtype(), DType::kF32);
  EXPECT_NEAR(by_default->num_kv_blocks(), 2 * f32->num_kv_blocks(), 1);
  cfg.kv_cache_dtype = DType::kF16;
  const auto refused = Engine::Create(model_.get(), nullptr, cfg);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("kv_cache_dtype F16"), absl::string_view::npos) << refused.status();

  auto f32_model = LoadModel(testing::FixtureDir("plain_softmax_silu_tied_f32"), &backend_);
  ASSERT_TRUE(f32_model.ok()) << f32_model.status();
  auto engine = Engine::Create(f32_model->get(), nullptr, EngineConfig{});
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->kv_cache_dtype(), DType::kF32);
}

// Both cache types serve the same requests: greedy tokens with a BF16 cache agree with float32's
// on most positions (the fixture's random weights make long continuations fragile), and a BF16
// cache stays batch invariant (ConcurrentGreedyRequestsEqualEachAlone runs with it).
TEST_F(EngineTest, Bf16AndFloat32CachesGiveMostlyTheSameGreedyTokens) {
  std::mt19937 rng(41);
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(Req(absl::StrCat("r", i), Prompt(rng, 5 + 7 * i), 12));
  EngineConfig cfg;
  auto bf16 = MakeEngine(cfg);
  ASSERT_EQ(bf16->kv_cache_dtype(), DType::kBF16);
  const auto got = RunAll(*bf16, reqs);
  bf16.reset();
  cfg.kv_cache_dtype = DType::kF32;
  auto f32 = MakeEngine(cfg);
  const auto want = RunAll(*f32, reqs);
  int same = 0, total = 0;
  for (size_t r = 0; r < reqs.size(); ++r) {
    ASSERT_EQ(got[r].size(), want[r].size());
    // Up to the first difference: after it, the sequences condition on different tokens.
    size_t i = 0;
    while (i < got[r].size() && got[r][i] == want[r][i]) ++i;
    same += static_cast<int>(i);
    total += static_cast<int>(got[r].size());
  }
  std::printf("greedy tokens equal to float32's before the first difference: %d of %d\n", same, total);
  EXPECT_GE(same, total / 2);
}

}  // namespace
}  // namespace ls

namespace ls {
namespace {

// The same batch-invariance check on the shipped, trained tiny model with its tokenizer.
TEST(TinyEngine, ConcurrentGreedyRequestsEqualEachAlone) {
  CpuBackend backend(2);
  const std::string dir = std::filesystem::path(LS_TEST_DATA_DIR).parent_path().parent_path().string() + "/models/tiny";
  auto model = LoadModel(dir, &backend);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tok = tok::LoadTokenizerJsonFile(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  const char* texts[] = {"In the beginning", "And the LORD said unto Moses,", "Blessed are the meek:", "x",
                         "And it came to pass, when the", "Let there be light"};
  std::vector<Request> reqs;
  for (int i = 0; i < 32; ++i) {
    Request r;
    r.id = absl::StrCat("t", i);
    r.prompt_ids = *(*tok)->Encode(absl::StrCat(texts[i % 6], i % 5 == 0 ? " and" : ""));
    r.params.temperature = 0;
    r.params.max_tokens = 8 + i % 9;
    r.params.ignore_eos = true;
    reqs.push_back(r);
  }
  // The batched run warms up as a server does; the 32 runs alone skip it (it changes nothing).
  auto run = [&](const std::vector<Request>& rs) {
    EngineConfig cfg;
    cfg.warmup = rs.size() > 1;
    auto engine = Engine::Create(model->get(), tok->get(), cfg);
    std::vector<std::unique_ptr<OutputQueue>> qs;
    for (const auto& r : rs) {
      qs.push_back(std::make_unique<OutputQueue>());
      EXPECT_TRUE((*engine)->Submit(r, qs.back()->Callback()).ok());
    }
    std::vector<std::pair<std::vector<int32_t>, std::string>> out;
    for (auto& q : qs) {
      RequestOutput o = q->WaitFinal();
      out.emplace_back(o.token_ids, o.text);
    }
    return out;
  };
  const auto batched = run(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(run({reqs[i]})[0], batched[i]) << "request " << i;
}

}  // namespace
}  // namespace ls
