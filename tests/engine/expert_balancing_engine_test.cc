// The engine's expert balancing end to end on the fixture model (engine_fixture.h): expert-parallel
// devices and re-planned placements give the same greedy tokens, re-plans are remembered and, under
// a step budget, copied in chunks that finish while idle, the load window and the since-start
// counts cover a reply's steps before it is delivered, and bad placement settings are refused.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/engine/engine_fixture.h"

namespace ls {
namespace {

class EngineBalancingTest : public EngineTest {
 protected:
  // Re-plans run in the background and switch in before a later step: on a slow host a run can end
  // before the first one is ready, so keep the engine stepping (a short request at a time, at most
  // 200) until one has switched in.
  static void KeepRunningUntilReplanned(Engine& engine) {
    std::mt19937 rng(99);
    for (int i = 0; i < 200 && engine.Metrics().replans == 0; ++i)
      RunAll(engine, {Req(absl::StrCat("more", i), Prompt(rng, 4), 8)});
  }
  // The chunks of the switches listed: all chunks copied when no migration is under way.
  static uint64_t ChunksOfSwitches(const MetricsSnapshot& m) {
    uint64_t chunks = 0;
    for (const ReplanEvent& e : m.replan_events) chunks += static_cast<uint64_t>(e.chunks);
    return chunks;
  }
  // The metrics once no budgeted migration is under way (every chunk copied belongs to a finished
  // switch) and nothing has changed for 50 ms, waiting up to 10 s.
  static MetricsSnapshot WhenMigrationsEnded(Engine& engine) {
    MetricsSnapshot m = engine.Metrics();
    for (int i = 0; i < 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      MetricsSnapshot next = engine.Metrics();
      const bool same = next.migration_chunks_total == m.migration_chunks_total && next.replans == m.replans;
      m = std::move(next);
      if (same && m.migration_chunks_total == ChunksOfSwitches(m)) break;
    }
    return m;
  }
};

TEST_F(EngineBalancingTest, ExpertParallelDevicesGiveTheSameGreedyTokens) {
  std::mt19937 rng(21);
  std::vector<Request> reqs;
  for (int i = 0; i < 10; ++i) reqs.push_back(Req(absl::StrCat("d", i), Prompt(rng, 3 + 5 * i), 8));
  auto single = MakeEngine();
  const auto expected = RunAll(*single, reqs);
  single.reset();
  for (int32_t devices : {1, 2, 4}) {
    EngineConfig cfg;
    cfg.experts.num_devices = devices;
    cfg.experts.expert_slots = (16 + devices - 1) / devices + 1;  // one spare slot per device
    auto engine = MakeEngine(cfg);
    EXPECT_EQ(RunAll(*engine, reqs), expected) << devices << " devices";
    const MetricsSnapshot m = engine->Metrics();
    EXPECT_EQ(m.num_devices, devices);
    int64_t rows = 0;
    for (int64_t r : m.device_rows) rows += r;
    EXPECT_GT(rows, 0) << "the routed rows went through the devices";
  }
}

TEST_F(EngineBalancingTest, ReplanningSwitchesPlacementWithoutChangingTokens) {
  std::mt19937 rng(22);
  std::vector<Request> reqs;
  for (int i = 0; i < 16; ++i) reqs.push_back(Req(absl::StrCat("r", i), Prompt(rng, 4 + 3 * i), 24));
  auto single = MakeEngine();
  const auto expected = RunAll(*single, reqs);
  single.reset();
  EngineConfig cfg;
  cfg.experts.num_devices = 4;
  cfg.experts.expert_slots = 6;  // 2 spare slots per device
  cfg.experts.replan_interval = 3;
  cfg.experts.load_window = 16;
  cfg.scheduler.max_num_seqs = 4;  // many steps, so several re-plans happen mid-stream
  auto engine = MakeEngine(cfg);
  EXPECT_EQ(RunAll(*engine, reqs), expected);
  KeepRunningUntilReplanned(*engine);
  const MetricsSnapshot m = engine->Metrics();
  EXPECT_GT(m.replans, 0u);
  EXPECT_GT(m.longest_switch_step_seconds, 0.0);
  ASSERT_EQ(m.replica_map.size(), 3u);
  EXPECT_EQ(m.replica_map[1].size(), 24u);
}

// Each switch is remembered, oldest first, with its time, its step, its planning time and the
// device balance expected from the loads it was planned on (max/mean, so at least 1).
TEST_F(EngineBalancingTest, ReplanSwitchesAreRememberedWithTheirTimeStepAndExpectedBalance) {
  std::mt19937 rng(23);
  std::vector<Request> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back(Req(absl::StrCat("r", i), Prompt(rng, 4 + 3 * i), 20));
  EngineConfig cfg;
  cfg.experts.num_devices = 4;
  cfg.experts.expert_slots = 6;
  cfg.experts.replan_interval = 3;
  cfg.experts.load_window = 16;
  cfg.scheduler.max_num_seqs = 4;
  const double before_run = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto engine = MakeEngine(cfg);
  RunAll(*engine, reqs);
  KeepRunningUntilReplanned(*engine);
  const MetricsSnapshot m = engine->Metrics();
  ASSERT_GT(m.replans, 0u);
  ASSERT_EQ(m.replan_events.size(), std::min<size_t>(m.replans, MetricsSnapshot::kMaxReplanEvents));
  for (size_t i = 0; i < m.replan_events.size(); ++i) {
    const ReplanEvent& e = m.replan_events[i];
    EXPECT_GE(e.unix_seconds, before_run);
    EXPECT_LE(e.step, m.steps);
    EXPECT_GT(e.plan_seconds, 0.0);
    EXPECT_GE(e.device_max_over_mean_before, 1.0 - 1e-9) << i;
    EXPECT_GE(e.device_max_over_mean_after, 1.0 - 1e-9) << i;
    EXPECT_EQ(e.copied_bytes, m.rank_expert_bytes[0]) << "one rank: its devices' whole share, copied anew";
    EXPECT_GE(e.moved_slots, 0);
    EXPECT_LE(e.moved_slots, 4 * 6 * static_cast<int64_t>(m.moe_layers.size()));
    if (i > 0) {
      EXPECT_GE(e.unix_seconds, m.replan_events[i - 1].unix_seconds);
      EXPECT_GT(e.step, m.replan_events[i - 1].step);
    }
  }
  EXPECT_DOUBLE_EQ(m.last_replan_seconds, m.replan_events.back().plan_seconds);
  int64_t copied = 0, moved = 0;
  for (const ReplanEvent& e : m.replan_events) copied += e.copied_bytes, moved += e.moved_slots;
  if (m.replans <= MetricsSnapshot::kMaxReplanEvents) {
    EXPECT_EQ(m.migration_bytes_total, copied);
    EXPECT_EQ(m.moved_slots_total, moved);
  }
  EXPECT_GT(m.moved_slots_total, 0) << "a re-plan from skewed loads moves experts";
}

// Under a step budget the new placement is copied on the loop between steps, a chunk before each,
// and switched in once complete, with the tokens unchanged. A budget below any slot's copy moves
// one slot a step (as many chunks as placed slots); a generous one moves the whole placement
// before one step. Each chunk is recorded with its step, slots, bytes and time.
TEST_F(EngineBalancingTest, ReplanUnderAStepBudgetIsCopiedInChunksWithoutChangingTokens) {
  std::mt19937 rng(24);
  std::vector<Request> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back(Req(absl::StrCat("r", i), Prompt(rng, 4 + 3 * i), 20));
  auto single = MakeEngine();
  const auto expected = RunAll(*single, reqs);
  single.reset();
  for (const double budget_ms : {1e-9, 1e6}) {
    SCOPED_TRACE(absl::StrCat("budget ", budget_ms, " ms"));
    EngineConfig cfg;
    cfg.experts.num_devices = 4;
    cfg.experts.expert_slots = 6;
    cfg.experts.replan_interval = 3;
    cfg.experts.load_window = 16;
    cfg.experts.replan_step_budget_ms = budget_ms;
    cfg.scheduler.max_num_seqs = 4;
    auto engine = MakeEngine(cfg);
    EXPECT_EQ(RunAll(*engine, reqs), expected);
    KeepRunningUntilReplanned(*engine);
    const MetricsSnapshot m = WhenMigrationsEnded(*engine);
    ASSERT_GT(m.replans, 0u);
    // The placement in use is the last switch's: its placed slots are what that switch copied.
    int64_t placed_slots = 0;
    for (const auto& layer : m.replica_map)
      for (int32_t e : layer) placed_slots += e >= 0;
    const ReplanEvent& last = m.replan_events.back();
    EXPECT_EQ(last.chunks, budget_ms < 1 ? placed_slots : 1);
    EXPECT_GT(last.migration_seconds, 0.0);
    EXPECT_GE(last.plan_seconds, last.migration_seconds);
    EXPECT_LE(last.max_chunk_seconds, m.max_migration_chunk_seconds);
    EXPECT_EQ(last.copied_bytes, m.rank_expert_bytes[0]);
    EXPECT_GE(m.migration_chunks_total, ChunksOfSwitches(m)) << "a migration may be under way";
    ASSERT_FALSE(m.migration_chunks.empty());
    for (size_t i = 0; i < m.migration_chunks.size(); ++i) {
      const MigrationChunk& c = m.migration_chunks[i];
      EXPECT_EQ(c.slots, budget_ms < 1 ? 1 : placed_slots);
      EXPECT_GT(c.bytes, 0);
      EXPECT_LE(c.seconds, m.max_migration_chunk_seconds);
      if (i > 0) {
        // One chunk before each step while steps run; chunks copied while idle share a step.
        EXPECT_GE(c.step, m.migration_chunks[i - 1].step);
      }
    }
    // The last switch's chunks are the last ones recorded (no migration is under way), and their
    // bytes are its copy.
    ASSERT_GE(static_cast<int64_t>(m.migration_chunks.size()), last.chunks);
    int64_t bytes = 0;
    for (size_t i = m.migration_chunks.size() - static_cast<size_t>(last.chunks); i < m.migration_chunks.size(); ++i)
      bytes += m.migration_chunks[i].bytes;
    EXPECT_EQ(bytes, last.copied_bytes);
  }
}

// A budgeted re-plan still being copied when the traffic stops is finished while the engine is
// idle (its chunks go on back to back), not left until the next request.
TEST_F(EngineBalancingTest, AMigrationUnderWayFinishesWhileIdle) {
  EngineConfig cfg;
  cfg.experts.num_devices = 4;
  cfg.experts.expert_slots = 6;
  cfg.experts.replan_interval = 3;
  cfg.experts.load_window = 16;
  cfg.experts.replan_step_budget_ms = 1e-9;  // a slot a chunk: more chunks than the request has steps
  auto engine = MakeEngine(cfg);
  std::mt19937 rng(5);
  RunAll(*engine, {Req("a", Prompt(rng, 4), 12)});  // a plan starts at its third step
  // No more traffic: the switch must come (waiting up to 20 s), and no copy be left under way.
  MetricsSnapshot m = engine->Metrics();
  for (int i = 0; i < 400; ++i) {
    m = engine->Metrics();
    if (m.replans >= 1 && m.migration_chunks_total == ChunksOfSwitches(m)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(m.replans, 1u) << "the migration stopped with the traffic";
  EXPECT_EQ(m.migration_chunks_total, ChunksOfSwitches(m)) << "a migration left under way";
  EXPECT_GT(m.migration_chunks_total, m.steps) << "chunks were copied between steps and after the last";
  // And the engine serves on the new placement.
  EXPECT_EQ(RunAll(*engine, {Req("b", Prompt(rng, 5), 6)})[0].size(), 6u);
}

// The window copied out for other threads holds the MoE layers only, sums to the tokens routed in
// its steps, and says when its first and last steps ended.
TEST_F(EngineBalancingTest, ExpertWindowSnapshotCoversTheMoeLayersOfTheLastSteps) {
  EngineConfig cfg;
  cfg.experts.load_window = 4;
  auto engine = MakeEngine(cfg);
  ExpertLoadWindowSnapshot empty = engine->ExpertWindow();
  EXPECT_EQ(empty.steps, 0);
  EXPECT_EQ(empty.first_step_unix_seconds, 0.0);
  std::mt19937 rng(3);
  RunAll(*engine, {Req("a", Prompt(rng, 6), 10)});
  const ExpertLoadWindowSnapshot w = engine->ExpertWindow();
  const ModelConfig& c = model_->config();
  std::vector<int32_t> moe;
  for (int32_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.is_moe_layer(l)) moe.push_back(l);
  ASSERT_FALSE(moe.empty());
  EXPECT_LT(moe.size(), static_cast<size_t>(c.num_hidden_layers)) << "the fixture interleaves a dense layer";
  EXPECT_EQ(w.moe_layers, moe);
  EXPECT_EQ(w.capacity, 4);
  EXPECT_EQ(w.steps, 4);  // 10 steps ran; the window keeps 4
  EXPECT_EQ(w.num_experts, c.moe.num_experts);
  ASSERT_EQ(w.tokens.size(), moe.size() * c.moe.num_experts);
  for (size_t i = 0; i < moe.size(); ++i) {
    int64_t sum = 0;
    for (int32_t e = 0; e < c.moe.num_experts; ++e) sum += w.tokens[i * c.moe.num_experts + e];
    EXPECT_EQ(sum, 4 * c.moe.top_k) << "4 decode steps of one token, top-k experts each, layer " << moe[i];
  }
  EXPECT_GT(w.first_step_unix_seconds, 0.0);
  EXPECT_LE(w.first_step_unix_seconds, w.last_step_unix_seconds);
}

// A step's expert load is counted before its tokens are delivered: the final output's callback
// (run on the engine's loop) already finds every step of its request in the window and in the
// metrics' since-start counts.
TEST_F(EngineBalancingTest, AReplysStepsAreCountedBeforeTheReplyIsDelivered) {
  EngineConfig cfg;
  cfg.experts.load_window = 64;
  auto engine = MakeEngine(cfg);
  std::mt19937 rng(5);
  constexpr int kPrompt = 6, kMaxTokens = 5;
  ExpertLoadWindowSnapshot window;
  std::vector<int64_t> since_start;
  OutputQueue q;
  OutputCallback deliver = q.Callback();
  ASSERT_TRUE(engine
                  ->Submit(Req("a", Prompt(rng, kPrompt), kMaxTokens),
                           [&](RequestOutput o) {
                             if (o.finish_reason != FinishReason::kNone) {
                               window = engine->ExpertWindow();
                               since_start = engine->Metrics().expert_tokens;
                             }
                             deliver(std::move(o));
                           })
                  .ok());
  ASSERT_EQ(q.WaitFinal().token_ids.size(), static_cast<size_t>(kMaxTokens));
  // One prefill step of the prompt, then a decode step of one token per further output token. The
  // last layer routes only the rows whose logits are read: the prompt's last token, then each
  // decoded one.
  const int64_t K = model_->config().moe.top_k;
  EXPECT_EQ(window.steps, kMaxTokens);
  const int32_t N = model_->config().moe.num_experts;
  ASSERT_EQ(window.tokens.size(), window.moe_layers.size() * N);
  for (size_t i = 0; i < window.moe_layers.size(); ++i) {
    const bool last = window.moe_layers[i] == model_->config().num_hidden_layers - 1;
    const int64_t routed = (last ? kMaxTokens : kPrompt + kMaxTokens - 1) * K;
    int64_t in_window = 0, counted = 0;
    for (int32_t e = 0; e < N; ++e) {
      in_window += window.tokens[i * N + e];
      counted += since_start.at(static_cast<size_t>(window.moe_layers[i]) * N + e);
    }
    EXPECT_EQ(in_window, routed) << "layer " << window.moe_layers[i];
    EXPECT_EQ(counted, routed) << "layer " << window.moe_layers[i];
  }
}

TEST_F(EngineBalancingTest, BadPlacementConfigurationIsRefused) {
  EngineConfig cfg;
  cfg.experts.num_devices = 2;
  cfg.experts.expert_slots = 3;  // 6 slots for 16 experts
  EXPECT_FALSE(Engine::Create(model_.get(), nullptr, cfg).ok());
  EngineConfig bad_json;
  bad_json.experts.placement_json = R"({"num_devices": 1, "slots_per_device": 16, "layers": {"1": [0]}})";
  EXPECT_FALSE(Engine::Create(model_.get(), nullptr, bad_json).ok());
  EngineConfig replan_without_devices;
  replan_without_devices.experts.replan_interval = 5;
  EXPECT_FALSE(Engine::Create(model_.get(), nullptr, replan_without_devices).ok());
  EngineConfig negative_budget;
  negative_budget.experts.num_devices = 2;
  negative_budget.experts.replan_interval = 5;
  negative_budget.experts.replan_step_budget_ms = -1;
  EXPECT_FALSE(Engine::Create(model_.get(), nullptr, negative_budget).ok());
  EngineConfig budget_without_replans;
  budget_without_replans.experts.num_devices = 2;
  budget_without_replans.experts.replan_step_budget_ms = 5;
  EXPECT_FALSE(Engine::Create(model_.get(), nullptr, budget_without_replans).ok());
}

}  // namespace
}  // namespace ls
