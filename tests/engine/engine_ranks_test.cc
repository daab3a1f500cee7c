// The engine over a group of ranks, without MPI: a group whose "ranks" are model instances in this
// process (each with its own KV cache, as data-parallel attention gives every rank its own
// sequences). Greedy tokens equal the single-process engine's, each rank computes only its own
// sequences, a model with recurrent state resumes cached prefixes from snapshots in each rank's own
// cache, and a group that breaks mid-run or while idle makes the engine answer every request,
// close intake and report the failure once.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <stdexcept>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/engine/checkpoint_engine.h"
#include "tests/test_util.h"

namespace ls {
namespace {

// Ranks 1.. are models of their own with their own caches; rank 0 is the engine's.
class InProcessGroup final : public RankGroup {
 public:
  InProcessGroup(int32_t ranks, const std::string& model_dir) : backend_(1) {
    for (int32_t r = 1; r < ranks; ++r) {
      auto m = LoadModel(model_dir, &backend_);
      EXPECT_TRUE(m.ok()) << m.status();
      models_.push_back(std::move(*m));
    }
    tokens_.assign(ranks, 0);
  }
  int32_t size() const override { return static_cast<int32_t>(models_.size()) + 1; }
  absl::Status Start(const RankCacheSpec& c, const LayerPlacements&) override {
    for (auto& m : models_)
      caches_.push_back(std::make_unique<KvCache>(&backend_, m->kv_layout(), c.num_blocks, c.block_size, c.dtype,
                                                   c.num_state_slots));
    return absl::OkStatus();
  }
  absl::Status Step(const std::vector<StepBatch>& batches, KvCache& cache, std::vector<std::vector<float>>* logits,
                    std::vector<std::vector<float>>* hidden) override {
    if (fail_at_step_ >= 0 && steps_ == fail_at_step_) return absl::UnavailableError("rank 1 stopped answering");
    if (throw_at_step_ >= 0 && steps_ == throw_at_step_)
      throw std::length_error("rank 0's step buffers could not grow");
    while (paused_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++steps_;
    logits->resize(size());
    if (hidden) hidden->resize(size());
    for (int32_t r = 0; r < size(); ++r) {
      tokens_[r] += static_cast<int64_t>(batches[r].tokens.size());
      Model* model = r == 0 ? leader_ : models_[r - 1].get();
      KvCache& kv = r == 0 ? cache : *caches_[r - 1];
      model->CaptureHidden(hidden ? &(*hidden)[r] : nullptr);
      const absl::Status st = model->Forward(batches[r], kv, &(*logits)[r]);
      model->CaptureHidden(nullptr);
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }
  std::chrono::milliseconds idle_interval() const override { return std::chrono::milliseconds(5); }
  absl::Status Idle() override {
    ++idles_;
    return fail_when_idle_ ? absl::UnavailableError("rank 1 missed its heartbeat") : absl::OkStatus();
  }
  void PreparePlacement(int64_t, const LayerPlacements&) override {}
  bool PlacementBuilt(int64_t) const override { return true; }
  void SwitchPlacement(int64_t) override {}
  std::vector<RankExpertMemory> BuiltMemory() const override { return std::vector<RankExpertMemory>(size()); }
  void Stop() override {}

  Model* leader_ = nullptr;
  std::atomic<bool> paused_{false};  // steps wait while set (requests submitted meanwhile run together)
  int fail_at_step_ = -1;
  int throw_at_step_ = -1;  // a fault of the server's: the step throws
  std::atomic<bool> fail_when_idle_{false};
  std::atomic<int> idles_{0};
  int steps_ = 0;
  std::vector<int64_t> tokens_;  // [ranks] tokens each computed

 private:
  CpuBackend backend_;
  std::vector<std::unique_ptr<Model>> models_;
  std::vector<std::unique_ptr<KvCache>> caches_;
};

class EngineRanksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FixtureDir("latent_sigmoid_situ_bf16");
    auto m = LoadModel(dir_, &backend_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    std::mt19937 rng(5);
    for (int i = 0; i < 9; ++i) {
      Request r;
      r.id = absl::StrCat("q", i);
      for (int t = 0; t < 3 + 4 * i; ++t) r.prompt_ids.push_back(static_cast<int32_t>(3 + rng() % 500));
      r.params.max_tokens = 10;
      r.params.temperature = 0;
      r.params.ignore_eos = true;
      reqs_.push_back(std::move(r));
    }
  }
  std::vector<std::vector<int32_t>> Run(EngineConfig cfg) {
    auto e = Engine::Create(model_.get(), nullptr, cfg);
    EXPECT_TRUE(e.ok()) << e.status();
    std::vector<std::unique_ptr<OutputQueue>> qs;
    for (const Request& r : reqs_) {
      qs.push_back(std::make_unique<OutputQueue>());
      EXPECT_TRUE((*e)->Submit(r, qs.back()->Callback()).ok());
    }
    std::vector<std::vector<int32_t>> out;
    for (auto& q : qs) out.push_back(q->WaitFinal().token_ids);
    return out;
  }

  CpuBackend backend_{1};
  std::string dir_;
  std::unique_ptr<Model> model_;
  std::vector<Request> reqs_;
};

TEST_F(EngineRanksTest, GreedyTokensEqualOneProcessAndEachRankRunsItsShare) {
  const auto expected = Run({});
  for (int32_t ranks : {2, 3}) {
    InProcessGroup group(ranks, dir_);
    group.leader_ = model_.get();
    EngineConfig cfg;
    cfg.ranks = &group;
    cfg.scheduler.max_num_seqs = 6;
    EXPECT_EQ(Run(cfg), expected) << ranks << " ranks";
    for (int32_t r = 0; r < ranks; ++r) EXPECT_GT(group.tokens_[r], 0) << "rank " << r << " ran no sequence";
  }
}

TEST_F(EngineRanksTest, SmallPerRankCachesPreemptWithoutChangingTokens) {
  const auto expected = Run({});
  InProcessGroup group(2, dir_);
  group.leader_ = model_.get();
  EngineConfig cfg;
  cfg.ranks = &group;
  cfg.num_kv_blocks = 8;  // per rank: 128 tokens, far less than the nine sequences need at once
  cfg.warmup = false;
  EXPECT_EQ(Run(cfg), expected);
}

// Runs reqs_ on an engine over `group`, which fails mid-run, and checks what a failed engine does:
// every accepted request is answered with `finish` and an error holding each of `words`; requests
// that arrive once it has failed (a slow host) are refused as unavailable; intake closes, /ready
// turns false, and the process is told once, with a status of `code` holding the last word.
void ExpectFailedEngineAnswersEveryRequest(Model* model, const std::vector<Request>& reqs, InProcessGroup& group,
                                           FinishReason finish, absl::StatusCode code,
                                           const std::vector<std::string>& words) {
  std::atomic<int> failures{0};
  EngineConfig cfg;
  cfg.ranks = &group;
  cfg.on_failure = [&](const absl::Status& s) {
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(s.message().find(words.back()), std::string::npos) << s;
    ++failures;
  };
  auto e = Engine::Create(model, nullptr, cfg);
  ASSERT_TRUE(e.ok()) << e.status();
  std::vector<std::unique_ptr<OutputQueue>> qs;
  for (const Request& r : reqs) {
    auto q = std::make_unique<OutputQueue>();
    const absl::Status s = (*e)->Submit(r, q->Callback());
    if (s.ok()) {
      qs.push_back(std::move(q));
    } else {
      EXPECT_TRUE(absl::IsUnavailable(s)) << s;
      EXPECT_TRUE((*e)->failed());
    }
  }
  ASSERT_FALSE(qs.empty());
  for (auto& q : qs) {
    const RequestOutput o = q->WaitFinal();
    EXPECT_EQ(o.finish_reason, finish);
    for (const std::string& w : words) EXPECT_NE(o.error.find(w), std::string::npos) << o.error;
  }
  EXPECT_TRUE((*e)->failed());
  EXPECT_TRUE((*e)->draining()) << "/ready must turn false";
  OutputQueue late;
  EXPECT_TRUE(absl::IsUnavailable((*e)->Submit(reqs[0], late.Callback())));
  EXPECT_EQ((*e)->num_live_requests(), 0u);
  e->reset();
  EXPECT_EQ(failures.load(), 1);
}

TEST_F(EngineRanksTest, GroupBreakingMidRunAnswersEveryRequestAndClosesIntake) {
  InProcessGroup group(2, dir_);
  group.leader_ = model_.get();
  group.fail_at_step_ = 4;  // the warm-up is step 0
  ExpectFailedEngineAnswersEveryRequest(model_.get(), reqs_, group, FinishReason::kCancelled,
                                        absl::StatusCode::kUnavailable,
                                        {"rank group failed", "rank 1 stopped answering"});
}

// An exception out of a step (a fault of the server's, not a request's) fails the engine rather
// than ending the process: every request is answered as failed, naming it.
TEST_F(EngineRanksTest, StepThatThrowsFailsTheEngineAndAnswersEveryRequest) {
  InProcessGroup group(1, dir_);
  group.leader_ = model_.get();
  group.throw_at_step_ = 3;  // the warm-up is step 0
  ExpectFailedEngineAnswersEveryRequest(model_.get(), reqs_, group, FinishReason::kError, absl::StatusCode::kInternal,
                                        {"the engine failed", "step buffers could not grow"});
}

TEST_F(EngineRanksTest, IdleEngineSendsHeartbeatsAndNoticesAGroupThatBroke) {
  InProcessGroup group(2, dir_);
  group.leader_ = model_.get();
  std::atomic<int> failures{0};
  EngineConfig cfg;
  cfg.ranks = &group;
  cfg.on_failure = [&](const absl::Status&) { ++failures; };
  auto e = Engine::Create(model_.get(), nullptr, cfg);
  ASSERT_TRUE(e.ok()) << e.status();
  for (int i = 0; i < 400 && group.idles_.load() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GE(group.idles_.load(), 3) << "no heartbeat while idle";
  group.fail_when_idle_ = true;
  for (int i = 0; i < 400 && !(*e)->failed(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE((*e)->failed());
  e->reset();
  EXPECT_EQ(failures.load(), 1);
}

// Kimi-Linear over two ranks: two families of prompts, each sharing a prefix, submitted two at a
// time so that both ranks run; later prompts go to the rank caching their prefix and resume from
// snapshots kept in that rank's cache (copies travel in each rank's batch, in that cache's
// numbers), with the tokens of a run without the cache.
TEST_F(EngineRanksTest, RecurrentModelsResumeFromSnapshotsInTheirRanksCache) {
  const std::string dir = testing::FixtureParamDir("hf/kimi_linear_f32");
  auto leader = LoadModel(dir, &backend_);
  ASSERT_TRUE(leader.ok()) << leader.status();
  std::mt19937 rng(6);
  std::vector<int32_t> shared[2];
  for (auto& s : shared)
    for (int t = 0; t < 40; ++t) s.push_back(static_cast<int32_t>(rng() % (*leader)->config().vocab_size));
  std::vector<Request> reqs;
  for (int i = 0; i < 10; ++i) {
    Request r;
    r.id = absl::StrCat("h", i);
    r.prompt_ids = shared[i % 2];
    for (int t = 0; t <= i; ++t) r.prompt_ids.push_back(static_cast<int32_t>(1 + (7 * i + t) % 50));
    r.params.max_tokens = 5;
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    reqs.push_back(std::move(r));
  }
  InProcessGroup group(2, dir);
  group.leader_ = leader->get();
  auto run = [&](EngineConfig cfg, size_t at_once, int32_t* cached) {
    auto e = Engine::Create(leader->get(), nullptr, cfg);
    EXPECT_TRUE(e.ok()) << e.status();
    std::vector<std::vector<int32_t>> out;
    *cached = 0;
    for (size_t i = 0; i < reqs.size(); i += at_once) {
      std::vector<std::unique_ptr<OutputQueue>> qs;
      for (size_t j = i; j < std::min(i + at_once, reqs.size()); ++j) {
        qs.push_back(std::make_unique<OutputQueue>());
        EXPECT_TRUE((*e)->Submit(reqs[j], qs.back()->Callback()).ok());
      }
      group.paused_ = false;  // the first pair runs together, one on each rank
      for (auto& q : qs) {
        const RequestOutput o = q->WaitFinal();
        out.push_back(o.token_ids);
        *cached += o.cached_prompt_tokens;
      }
    }
    return out;
  };
  EngineConfig cold;
  cold.enable_prefix_caching = false;
  cold.kv_cache_dtype = DType::kF32;
  int32_t cached = 0;
  const auto expected = run(cold, reqs.size(), &cached);
  EngineConfig cfg;
  cfg.ranks = &group;
  cfg.kv_cache_dtype = DType::kF32;
  cfg.warmup = false;
  group.paused_ = true;
  EXPECT_EQ(run(cfg, 2, &cached), expected);
  EXPECT_GE(cached, 6 * 40) << "the last three of each family resume from the snapshot at 40";
  EXPECT_GT(group.tokens_[0], 0);
  EXPECT_GT(group.tokens_[1], 0) << "rank 1 ran none of them";
}

// Speculation with the checkpoint's MTP layer: the proposer runs beside the engine and reads
// every rank's hidden rows, which come back with the logits.
TEST_F(EngineRanksTest, MtpDraftsReadEveryRanksHiddenRows) {
  const std::string dir = testing::FixtureParamDir("hf/deepseek_v3_mtp_f32");
  auto leader = LoadModel(dir, &backend_);
  ASSERT_TRUE(leader.ok()) << leader.status();
  auto mtp = LoadModel(dir, &backend_, LoadOptions{.next_token_layer = true});
  ASSERT_TRUE(mtp.ok()) << mtp.status();
  std::vector<Request> reqs = reqs_;
  for (Request& r : reqs)
    for (int32_t& t : r.prompt_ids) t %= static_cast<int32_t>((*leader)->config().vocab_size);
  auto run = [&](EngineConfig cfg, MetricsSnapshot* m) {
    cfg.kv_cache_dtype = DType::kF32;
    cfg.speculative = {3, 1, 4, mtp->get()};
    auto e = Engine::Create(leader->get(), nullptr, cfg);
    EXPECT_TRUE(e.ok()) << e.status();
    std::vector<std::unique_ptr<OutputQueue>> qs;
    EXPECT_TRUE(SubmitTogether(**e, reqs, &qs).ok());  // together: spread over the ranks
    std::vector<std::vector<int32_t>> out;
    for (auto& q : qs) out.push_back(q->WaitFinal().token_ids);
    *m = (*e)->Metrics();
    return out;
  };
  MetricsSnapshot one, two;
  const auto expected = run({}, &one);
  InProcessGroup group(2, dir);
  group.leader_ = leader->get();
  EngineConfig cfg;
  cfg.ranks = &group;
  cfg.warmup = false;
  EXPECT_EQ(run(cfg, &two), expected);
  EXPECT_GT(group.tokens_[1], 0) << "rank 1 ran sequences";
  EXPECT_GT(two.spec_draft_tokens, 0u);
  // The drafts are those of one process: every rank's rows reached the proposer.
  EXPECT_EQ(two.spec_draft_tokens, one.spec_draft_tokens);
  EXPECT_EQ(two.spec_accepted_tokens, one.spec_accepted_tokens);
}

}  // namespace
}  // namespace ls
