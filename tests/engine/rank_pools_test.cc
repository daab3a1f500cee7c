// KV blocks and state slots in one pool per rank: a table takes blocks from its own pool only, a
// cached prefix is shared within its pool only, and the scheduler admits a sequence into the
// least-loaded pool that has room and preempts within the pool that ran short.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "engine/block_manager.h"
#include "engine/scheduler.h"
#include "engine/state_slots.h"
#include "tests/engine/scheduler_test_util.h"

namespace ls {
namespace {

using test::Complete;
using test::Seq;

TEST(RankPools, BlockTablesTakeBlocksFromTheirOwnPoolOnly) {
  BlockManager bm(8, 4, false, /*num_pools=*/2);  // pool 0: blocks 0-3, pool 1: blocks 4-7
  EXPECT_EQ(bm.pool_blocks(), 4);
  BlockTable a, b;
  b.pool = 1;
  ASSERT_TRUE(bm.EnsureCapacity(&b, 16));  // all four of pool 1
  for (int32_t block : b.blocks) EXPECT_GE(block, 4);
  EXPECT_EQ(bm.num_available(1), 0);
  EXPECT_EQ(bm.num_available(0), 4);
  BlockTable c;
  c.pool = 1;
  EXPECT_FALSE(bm.EnsureCapacity(&c, 1)) << "pool 0's free blocks are not pool 1's";
  ASSERT_TRUE(bm.EnsureCapacity(&a, 5));
  for (int32_t block : a.blocks) EXPECT_LT(block, 4);
  bm.Free(&b);
  EXPECT_EQ(bm.num_available(1), 4);
  EXPECT_EQ(bm.num_available(), 6);
  bm.Free(&a);
  EXPECT_EQ(bm.num_used(), 0);
}

TEST(RankPools, CachedPrefixIsSharedWithinItsPoolOnly) {
  BlockManager bm(16, 4, true, 2);
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  BlockTable first;
  first.pool = 1;
  ASSERT_TRUE(bm.EnsureCapacity(&first, 9));
  bm.CommitFullBlocks(tokens, 9, &first);
  BlockTable other_pool;  // pool 0: the same tokens find nothing
  EXPECT_EQ(bm.AcquirePrefix(tokens, &other_pool), 0);
  BlockTable same_pool;
  same_pool.pool = 1;
  EXPECT_EQ(bm.AcquirePrefix(tokens, &same_pool), 8);
  EXPECT_EQ(same_pool.blocks[0], first.blocks[0]);
  EXPECT_EQ(bm.ref_count(first.blocks[0]), 2);
  bm.Free(&same_pool);
  bm.Free(&first);
  EXPECT_EQ(bm.num_used(), 0);
}

TEST(RankPools, StateSlotsComeFromTheirPool) {
  StateSlots slots(6, 3);
  EXPECT_EQ(slots.pool_slots(), 2);
  const int32_t a = slots.Acquire(2), b = slots.Acquire(2);
  EXPECT_EQ(std::set<int32_t>({a, b}), std::set<int32_t>({4, 5}));
  EXPECT_EQ(slots.Acquire(2), -1);
  EXPECT_EQ(slots.num_available(0), 2);
  slots.Release(a);
  EXPECT_EQ(slots.num_available(2), 1);
  EXPECT_EQ(slots.num_used(), 1);
}

TEST(RankPools, SchedulerSpreadsSequencesOverThePools) {
  BlockManager bm(64, 4, false, 2);
  StateSlots slots(8, 2);
  Scheduler sch({8, 100}, &bm, &slots);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 4; ++i) {
    seqs.push_back(Seq(5, i));
    sch.Add(seqs.back().get());
  }
  SchedulerPlan p = sch.Schedule();
  ASSERT_EQ(p.items.size(), 4u);
  int per_pool[2] = {0, 0};
  for (const auto& s : seqs) {
    ++per_pool[s->table.pool];
    for (int32_t block : s->table.blocks) EXPECT_EQ(block / bm.pool_blocks(), s->table.pool);
    EXPECT_EQ(s->state_slot / slots.pool_slots(), s->table.pool);
  }
  EXPECT_EQ(per_pool[0], 2);
  EXPECT_EQ(per_pool[1], 2);
}

TEST(RankPools, SequenceGoesWhereThereIsRoom) {
  BlockManager bm(8, 4, false, 2);  // 4 blocks (16 tokens) per pool
  Scheduler sch({8, 100}, &bm);
  auto big = Seq(13, 0), next = Seq(9, 1);
  sch.Add(big.get());
  Complete(sch, sch.Schedule());  // 4 blocks in pool 0 (the first pool with room)
  EXPECT_EQ(big->table.pool, 0);
  sch.Add(next.get());
  SchedulerPlan p = sch.Schedule();
  ASSERT_EQ(p.items.size(), 2u);
  EXPECT_EQ(next->table.pool, 1) << "pool 0 has no room for it";
}

TEST(RankPools, DecodeShortOfBlocksPreemptsWithinItsOwnPool) {
  BlockManager bm(8, 2, false, 2);  // 4 blocks (8 tokens) per pool
  Scheduler sch({8, 100}, &bm);
  auto a = Seq(3, 0), b = Seq(3, 1), c = Seq(3, 2), d = Seq(1, 3);
  for (auto* s : {a.get(), b.get(), c.get(), d.get()}) sch.Add(s);
  Complete(sch, sch.Schedule());
  ASSERT_EQ(a->table.pool, 0);
  ASSERT_EQ(b->table.pool, 1);
  ASSERT_EQ(c->table.pool, 0);
  ASSERT_EQ(d->table.pool, 1);
  Complete(sch, sch.Schedule());  // a and c now fill pool 0; pool 1 has one block left
  // a needs a third block: c, pool 0's newest, is preempted although d is the newest of all;
  // then b takes pool 1's last block and d, short of one, preempts itself (its pool's newest).
  SchedulerPlan q = sch.Schedule();
  ASSERT_EQ(q.preempted.size(), 2u);
  EXPECT_EQ(q.preempted[0], c.get());
  EXPECT_EQ(q.preempted[1], d.get());
  ASSERT_EQ(q.items.size(), 2u);
  EXPECT_EQ(q.items[0].seq, a.get());
  EXPECT_EQ(q.items[1].seq, b.get());
}

}  // namespace
}  // namespace ls
