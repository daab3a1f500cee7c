// Scheduler policy (decodes first, chunked prefill within the budget, sequence cap, priority,
// newest-first preemption) and a randomized test of thousands of submit / cancel / preempt /
// finish interleavings: afterwards every block is free, and at every step no two sequences hold
// the same block unless it is a shared, committed prefix block with their identical tokens.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>

#include "tests/engine/scheduler_test_util.h"

namespace ls {
namespace {

using test::Complete;
using test::Seq;

TEST(Scheduler, ChunksPrefillWithinTheBudgetAndDecodesFirst) {
  BlockManager bm(64, 4, false);
  Scheduler sch({8, 10}, &bm);
  auto a = Seq(6, 0), b = Seq(25, 1);
  sch.Add(a.get());
  sch.Add(b.get());
  SchedulerPlan p1 = sch.Schedule();
  ASSERT_EQ(p1.items.size(), 2u);
  EXPECT_EQ(p1.items[0].num_tokens, 6);
  EXPECT_TRUE(p1.items[0].sample);
  EXPECT_EQ(p1.items[1].num_tokens, 4);
  EXPECT_FALSE(p1.items[1].sample);
  Complete(sch, p1);
  SchedulerPlan p2 = sch.Schedule();
  ASSERT_EQ(p2.items.size(), 2u);
  EXPECT_EQ(p2.items[0].seq, a.get()) << "the decode comes first";
  EXPECT_EQ(p2.items[0].num_tokens, 1);
  EXPECT_EQ(p2.items[1].seq, b.get());
  EXPECT_EQ(p2.items[1].num_tokens, 9);
  EXPECT_EQ(p2.num_tokens, 10);
}

// A sequence that must compute its whole prompt (prompt logprobs) takes no cached prefix blocks;
// the next one with the same prompt does.
TEST(Scheduler, SequenceThatSkipsThePrefixCacheComputesEveryPromptToken) {
  BlockManager bm(64, 4, true);
  Scheduler sch({8, 100}, &bm);
  auto first = Seq(13, 0);
  sch.Add(first.get());
  Complete(sch, sch.Schedule());
  auto full = Seq(13, 1), reuse = Seq(13, 2);
  full->reuse_cached_prefix = false;
  sch.Add(full.get());
  sch.Add(reuse.get());
  SchedulerPlan p = sch.Schedule();
  ASSERT_EQ(p.items.size(), 3u);
  EXPECT_EQ(p.items[1].seq, full.get());
  EXPECT_EQ(p.items[1].num_tokens, 13);
  EXPECT_EQ(full->prefix_cached_tokens, 0);
  EXPECT_EQ(p.items[2].num_tokens, 1) << "12 tokens in 3 cached blocks";
  EXPECT_EQ(reuse->prefix_cached_tokens, 12);
}

TEST(Scheduler, CapsRunningSequencesAndHonoursPriority) {
  BlockManager bm(64, 4, false);
  Scheduler sch({2, 100}, &bm);
  auto a = Seq(3, 0, 5), b = Seq(3, 1, 0), c = Seq(3, 2, 1);
  sch.Add(a.get());
  sch.Add(b.get());
  sch.Add(c.get());
  SchedulerPlan p = sch.Schedule();
  ASSERT_EQ(p.items.size(), 2u);
  EXPECT_EQ(p.items[0].seq, b.get());
  EXPECT_EQ(p.items[1].seq, c.get());
  EXPECT_EQ(sch.num_waiting(), 1u);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  BlockManager bm(4, 2, false);  // 8 token slots
  Scheduler sch({8, 100}, &bm);
  auto a = Seq(3, 0), b = Seq(3, 1);
  sch.Add(a.get());
  sch.Add(b.get());
  Complete(sch, sch.Schedule());  // both prefilled: 2 blocks each, 4 tokens each after sampling
  SchedulerPlan p = sch.Schedule();  // decodes fit (positions 3 of 4 slots)
  ASSERT_EQ(p.items.size(), 2u);
  Complete(sch, p);
  SchedulerPlan q = sch.Schedule();  // each needs a third block: b (newest) is preempted
  ASSERT_EQ(q.preempted.size(), 1u);
  EXPECT_EQ(q.preempted[0], b.get());
  ASSERT_EQ(q.items.size(), 1u);
  EXPECT_EQ(q.items[0].seq, a.get());
  EXPECT_EQ(b->num_computed, 0);
  EXPECT_TRUE(b->table.blocks.empty());
  EXPECT_EQ(b->status, SeqStatus::kWaiting);
}

TEST(Scheduler, RandomInterleavingsLeakNoBlockAndShareNoneWrongly) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 20; ++round) {
    const int32_t block_size = 1 + rng() % 4;
    BlockManager bm(12 + rng() % 24, block_size, round % 2 == 0);
    Scheduler sch({1 + static_cast<int32_t>(rng() % 6), 1 + static_cast<int32_t>(rng() % 24)}, &bm);
    std::map<uint64_t, std::unique_ptr<Sequence>> live;
    std::map<uint64_t, int32_t> max_len;
    uint64_t next = 0;
    for (int step = 0; step < 300; ++step) {
      // Submit (prompts share prefixes from a small pool, so the prefix cache is exercised).
      if (rng() % 3 == 0) {
        const int32_t len = 1 + rng() % 10;
        auto s = Seq(len, next, rng() % 3, 0);
        for (auto& t : s->tokens) t = (rng() % 4 == 0) ? static_cast<int32_t>(rng() % 5) : t % 5;
        const int32_t cap = bm.num_blocks() * block_size;
        max_len[next] = std::min<int32_t>(cap, len + 1 + rng() % 8);
        if (max_len[next] <= len) continue;
        sch.Add(s.get());
        live[next++] = std::move(s);
      }
      // Cancel one at random.
      if (!live.empty() && rng() % 7 == 0) {
        auto it = std::next(live.begin(), rng() % live.size());
        sch.Remove(it->second.get());
        live.erase(it);
      }
      SchedulerPlan plan = sch.Schedule();
      ASSERT_LE(static_cast<int32_t>(sch.num_running()), 6);
      // Invariant: block ownership is consistent with reference counts, and shared blocks are only
      // committed prefix blocks holding identical tokens.
      std::map<int32_t, std::vector<std::pair<Sequence*, size_t>>> owners;
      for (auto& [id, s] : live)
        for (size_t i = 0; i < s->table.blocks.size(); ++i) owners[s->table.blocks[i]].push_back({s.get(), i});
      for (auto& [block, list] : owners) {
        ASSERT_EQ(bm.ref_count(block), static_cast<int32_t>(list.size()));
        for (auto& [s, idx] : list) {
          if (list.size() == 1) continue;
          ASSERT_LT(idx, s->table.hashes.size()) << "a shared block must be a committed full block";
          const auto& ref = list[0];
          for (int32_t k = 0; k < block_size; ++k)
            ASSERT_EQ(s->tokens[idx * block_size + k], ref.first->tokens[ref.second * block_size + k]);
        }
      }
      for (const auto& it : plan.items)
        ASSERT_GE(static_cast<int32_t>(it.seq->table.blocks.size()) * block_size, it.seq->num_computed + it.num_tokens);
      sch.OnStepDone(plan);
      for (const auto& it : plan.items) {
        if (!it.sample) continue;
        it.seq->tokens.push_back(static_cast<int32_t>(rng() % 5));
        const uint64_t id = it.seq->arrival;
        if (it.seq->num_tokens() >= max_len[id]) {
          sch.Remove(it.seq);
          live.erase(id);
        }
      }
    }
    for (auto& [id, s] : live) sch.Remove(s.get());
    EXPECT_EQ(bm.num_available(), bm.num_blocks()) << "round " << round;
    EXPECT_EQ(sch.num_running() + sch.num_waiting(), 0u);
  }
}

}  // namespace
}  // namespace ls

namespace ls {
namespace {

// Speculative drafts extend the planned decodes with what the budget and the free blocks leave.
TEST(SchedulerDrafts, DraftsUseOnlyWhatTheDecodesLeave) {
  for (int32_t blocks : {4, 2}) {
    BlockManager bm(blocks, 4, false);
    Scheduler sch({4, 8}, &bm);
    Sequence a, b;
    b.arrival = 1;
    for (Sequence* s : {&a, &b}) {
      s->tokens = {1, 2, 3};
      s->num_prompt_tokens = 3;
      sch.Add(s);
    }
    Complete(sch, sch.Schedule(), 4);  // both prompts, a token each: both decode next, a block each
    // A proposes 8 tokens; the budget leaves 6 after the two decodes.
    a.draft = {5, 6, 7, 8, 9, 10, 11, 12};
    SchedulerPlan p = sch.Schedule();
    ASSERT_EQ(p.items.size(), 2u);
    EXPECT_TRUE(p.preempted.empty()) << "a draft never costs another sequence its place";
    const ScheduledSeq& ia = p.items[0].seq == &a ? p.items[0] : p.items[1];
    if (blocks == 4) {
      EXPECT_EQ(ia.num_draft, 6) << "cut to the budget";
      EXPECT_EQ(ia.num_tokens, 7);
      EXPECT_EQ(p.num_tokens, 8);
    } else {
      EXPECT_EQ(ia.num_draft, 0) << "no free block for the draft's positions";
      EXPECT_EQ(p.num_tokens, 2);
    }
  }
}

}  // namespace
}  // namespace ls
