// The prefix cache of models with recurrent state, as bookkeeping: where the scheduler takes state
// snapshots (every interval, at a prompt's branch point from the cached prefixes, at its end),
// how a later prompt resumes from the deepest one with the copies that bring its state and partial
// block in, least-recently-used eviction, and snapshots giving their blocks back to sequences.
#include "engine/state_snapshots.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/scheduler.h"

namespace ls {
namespace {

constexpr int32_t kBlock = 4;

// A prompt: `shared` tokens of a common text, then tokens of its own (base distinguishes them).
std::unique_ptr<Sequence> SharedPrefixPrompt(int32_t shared, int32_t len, uint64_t arrival, int32_t base) {
  auto s = std::make_unique<Sequence>();
  s->arrival = arrival;
  for (int32_t i = 0; i < len; ++i) s->tokens.push_back(i < shared ? 1000 + i : base + i);
  s->num_prompt_tokens = len;
  return s;
}

struct Rig {
  explicit Rig(int32_t snapshot_slots, int32_t interval = 8, int32_t blocks = 64)
      : bm(blocks, kBlock, true, 1, /*track_branches=*/true), slots(4), snaps(&bm, snapshot_slots, /*first_slot=*/4, 1, interval),
        sch({4, 100}, &bm, &slots, &snaps) {}
  // Runs a sequence to the end of its prompt alone; returns each step's chunk.
  std::vector<int32_t> Prefill(Sequence* s, std::vector<SchedulerPlan>* plans = nullptr) {
    sch.Add(s);
    std::vector<int32_t> chunks;
    while (s->num_computed < s->num_prompt_tokens) {
      SchedulerPlan p = sch.Schedule();
      EXPECT_EQ(p.items.size(), 1u);
      if (p.items.empty()) break;
      chunks.push_back(p.items[0].num_tokens);
      if (plans) plans->push_back(p);
      sch.OnStepDone(p);
    }
    return chunks;
  }
  BlockManager bm;
  StateSlots slots;
  StateSnapshots snaps;
  Scheduler sch;
};

TEST(StateSnapshots, PrefillStopsWhereSnapshotsAreDueAndTakesThem) {
  Rig rig(8);
  auto a = SharedPrefixPrompt(0, 30, 0, 0);
  std::vector<SchedulerPlan> plans;
  EXPECT_EQ(rig.Prefill(a.get(), &plans), (std::vector<int32_t>{8, 8, 8, 6})) << "interval 8, then the prompt's end";
  EXPECT_TRUE(plans[0].copies.empty());
  // Each snapshot is copied out of the sequence's slot before the next step runs.
  const int32_t local = a->state_slot;
  ASSERT_EQ(plans[1].copies.size(), 1u);
  EXPECT_EQ(plans[1].copies[0].copy, (CacheCopy{CacheCopy::kState, local, 4}));
  EXPECT_EQ(plans[2].copies[0].copy, (CacheCopy{CacheCopy::kState, local, 5}));
  EXPECT_EQ(rig.snaps.num_held(), 4);  // 8, 16, 24 and 30 (its end)
  // The last one rides on the next plan, whatever it holds.
  auto other = SharedPrefixPrompt(0, 3, 1, 5000);
  rig.sch.Add(other.get());
  SchedulerPlan next = rig.sch.Schedule();
  ASSERT_EQ(next.copies.size(), 1u);
  EXPECT_EQ(next.copies[0].copy, (CacheCopy{CacheCopy::kState, local, 7}));
}

TEST(StateSnapshots, LaterPromptsResumeFromTheDeepestSnapshotAndLeaveOneAtTheirBranchPoint) {
  Rig rig(8);
  auto a = SharedPrefixPrompt(0, 30, 0, 0);
  rig.Prefill(a.get());
  rig.sch.Remove(a.get());
  // B shares 21 tokens with A: the snapshot at 16 is the deepest of its prefix.
  auto b = SharedPrefixPrompt(21, 40, 1, 2000);
  for (int i = 0; i < 21; ++i) b->tokens[i] = a->tokens[i];
  std::vector<SchedulerPlan> plans;
  const std::vector<int32_t> chunks = rig.Prefill(b.get(), &plans);
  EXPECT_EQ(b->prefix_cached_tokens, 16);
  EXPECT_EQ(b->branch_point, 21);
  EXPECT_EQ(chunks, (std::vector<int32_t>{5, 3, 8, 8})) << "to the branch point, then the intervals' 24 and 32, then its end";
  const int32_t b_slot = b->state_slot;
  bool restored = false;
  for (const PoolCopy& c : plans[0].copies) restored |= c.copy == CacheCopy{CacheCopy::kState, 5, b_slot};
  EXPECT_TRUE(restored) << "the snapshot at 16 (the second taken, slot 5) is copied into B's slot";
  const int32_t b_block5 = b->table.blocks[5];
  rig.sch.Remove(b.get());
  // C shares 23 tokens with B: it resumes at B's branch point 21, inside block 5, which is copied.
  auto c = SharedPrefixPrompt(23, 26, 2, 4000);
  for (int i = 0; i < 23; ++i) c->tokens[i] = b->tokens[i];
  plans.clear();
  rig.Prefill(c.get(), &plans);
  EXPECT_EQ(c->prefix_cached_tokens, 21);
  bool state = false, block = false;
  for (const PoolCopy& p : plans[0].copies) {
    state |= p.copy.kind == CacheCopy::kState && p.copy.dst == c->state_slot;
    block |= p.copy == CacheCopy{CacheCopy::kBlock, b_block5, c->table.blocks[5]};
  }
  EXPECT_TRUE(state);
  EXPECT_TRUE(block) << "the partial block of the snapshot at 21 comes as a copy";
  EXPECT_EQ(rig.bm.prefix_hit_tokens(), 16 + 21);
}

TEST(StateSnapshots, ThePromptItselfIsNeverFullyCached) {
  Rig rig(8);
  auto a = SharedPrefixPrompt(0, 16, 0, 0);
  rig.Prefill(a.get());
  rig.sch.Remove(a.get());
  auto again = SharedPrefixPrompt(0, 16, 1, 0);
  rig.Prefill(again.get());
  EXPECT_EQ(again->prefix_cached_tokens, 8) << "the snapshot at 16 would leave no token to compute";
}

TEST(StateSnapshots, LeastRecentlyUsedAreEvictedAndGiveBackTheirBlocks) {
  Rig rig(2, /*interval=*/0);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 3; ++i) {
    seqs.push_back(SharedPrefixPrompt(0, 10, i, 100 * i));
    rig.Prefill(seqs.back().get());
    rig.sch.Remove(seqs.back().get());
  }
  EXPECT_EQ(rig.snaps.num_taken(), 3);
  EXPECT_EQ(rig.snaps.num_evicted(), 1);
  EXPECT_EQ(rig.snaps.num_held(), 2);
  EXPECT_EQ(rig.bm.num_held_only(), 2) << "each holds the block its position 10 falls in";
  // The first prompt's snapshot is gone: a prompt extending it starts over, and leaves snapshots at
  // its branch point 8 (the first prompt's cached blocks end there) and its end, 14.
  auto again = SharedPrefixPrompt(0, 14, 9, 0);
  rig.Prefill(again.get());
  EXPECT_EQ(again->prefix_cached_tokens, 0);
  EXPECT_EQ(again->branch_point, 8);
  rig.sch.Remove(again.get());
  EXPECT_EQ(rig.snaps.num_evicted(), 3);
  EXPECT_EQ(rig.bm.num_held_only(), 1) << "only the snapshot at 14 holds a block";
  // Blocks held by snapshots go back to a sequence that needs them.
  EXPECT_TRUE(rig.snaps.EvictBlockHolder(0));
  EXPECT_FALSE(rig.snaps.EvictBlockHolder(0));
  EXPECT_EQ(rig.bm.num_held_only(), 0);
  EXPECT_EQ(rig.snaps.num_held(), 1);
}

TEST(StateSnapshots, ASequenceShortOfBlocksTakesThemFromSnapshots) {
  Rig rig(8, /*interval=*/0, /*blocks=*/8);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 4; ++i) {
    seqs.push_back(SharedPrefixPrompt(0, 6, i, 100 * i));  // each leaves a snapshot holding its second block
    rig.Prefill(seqs.back().get());
    rig.sch.Remove(seqs.back().get());
  }
  EXPECT_EQ(rig.bm.num_held_only(), 4);
  EXPECT_EQ(rig.bm.num_available(0), 4);
  auto big = SharedPrefixPrompt(0, 28, 9, 7000);  // 7 blocks
  rig.Prefill(big.get());
  EXPECT_EQ(big->num_computed, 28);
  EXPECT_GE(rig.snaps.num_evicted(), 3);
}

}  // namespace
}  // namespace ls
