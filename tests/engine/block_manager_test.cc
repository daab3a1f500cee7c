// BlockManager bookkeeping: allocation and release, prefix sharing by reference count (within a
// cache salt only), LRU eviction of cached blocks, and the rule that the last prompt token is never
// served from cache.
#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>

namespace ls {
namespace {

std::vector<int32_t> Range(int32_t n, int32_t start = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(BlockManager, AllocatesAndFreesEverything) {
  BlockManager bm(8, 4, false);
  BlockTable t;
  ASSERT_TRUE(bm.EnsureCapacity(&t, 9));
  EXPECT_EQ(t.blocks.size(), 3u);
  EXPECT_EQ(bm.num_available(), 5);
  ASSERT_TRUE(bm.EnsureCapacity(&t, 12));
  EXPECT_EQ(t.blocks.size(), 3u);
  EXPECT_FALSE(bm.EnsureCapacity(&t, 40));
  EXPECT_EQ(t.blocks.size(), 3u) << "a failed grow changes nothing";
  bm.Free(&t);
  EXPECT_EQ(bm.num_available(), 8);
  EXPECT_TRUE(t.blocks.empty());
}

TEST(BlockManager, SharesCommittedPrefixBlocks) {
  BlockManager bm(16, 4, true);
  std::vector<int32_t> a = Range(10);
  BlockTable ta;
  EXPECT_EQ(bm.AcquirePrefix(a, &ta), 0);
  ASSERT_TRUE(bm.EnsureCapacity(&ta, 10));
  bm.CommitFullBlocks(a, 10, &ta);  // blocks 0 and 1 are full
  std::vector<int32_t> b = Range(10);
  b[9] = 99;  // same first 9 tokens
  BlockTable tb;
  EXPECT_EQ(bm.AcquirePrefix(b, &tb), 8);
  EXPECT_EQ(tb.blocks[0], ta.blocks[0]);
  EXPECT_EQ(tb.blocks[1], ta.blocks[1]);
  EXPECT_EQ(bm.ref_count(ta.blocks[0]), 2);
  EXPECT_EQ(bm.prefix_hit_tokens(), 8);
  bm.Free(&ta);
  EXPECT_EQ(bm.ref_count(tb.blocks[0]), 1);
  bm.Free(&tb);
  EXPECT_EQ(bm.num_available(), 16);
}

// Tables of different cache salts never share a block (nor does a salted table with an unsalted
// one); tables of the same salt do, as unsalted ones do.
TEST(BlockManager, SaltedPrefixesAreSharedOnlyWithinTheirSalt) {
  BlockManager bm(32, 4, true);
  const std::vector<int32_t> a = Range(10);
  BlockTable first;
  first.salt = 7;
  ASSERT_TRUE(bm.EnsureCapacity(&first, 10));
  bm.CommitFullBlocks(a, 10, &first);
  for (const uint64_t salt : {uint64_t{0}, uint64_t{8}, uint64_t{7}}) {
    BlockTable t;
    t.salt = salt;
    EXPECT_EQ(bm.AcquirePrefix(a, &t), salt == 7 ? 8 : 0) << "salt " << salt;
    EXPECT_EQ(bm.CachedPrefix(a, t.scope()).size(), salt == 7 ? 2u : 0u);
    bm.Free(&t);
  }
  BlockTable plain;
  ASSERT_TRUE(bm.EnsureCapacity(&plain, 10));
  bm.CommitFullBlocks(a, 10, &plain);
  EXPECT_NE(plain.hashes[0], first.hashes[0]) << "the same tokens, another chain";
  BlockTable again;
  EXPECT_EQ(bm.AcquirePrefix(a, &again), 8);
  EXPECT_EQ(again.blocks[0], plain.blocks[0]);
}

TEST(BlockManager, NeverServesTheLastTokenFromCache) {
  BlockManager bm(16, 4, true);
  std::vector<int32_t> a = Range(8);
  BlockTable ta;
  bm.AcquirePrefix(a, &ta);
  ASSERT_TRUE(bm.EnsureCapacity(&ta, 8));
  bm.CommitFullBlocks(a, 8, &ta);
  BlockTable tb;
  EXPECT_EQ(bm.AcquirePrefix(a, &tb), 4) << "the second block holds the last token, so it is recomputed";
}

TEST(BlockManager, DifferentPrefixSameBlockTokensDoNotMatch) {
  BlockManager bm(16, 4, true);
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  BlockTable ta;
  bm.AcquirePrefix(a, &ta);
  ASSERT_TRUE(bm.EnsureCapacity(&ta, 9));
  bm.CommitFullBlocks(a, 9, &ta);
  std::vector<int32_t> b = {0, 2, 3, 4, 5, 6, 7, 8, 9};  // second block equal, first differs
  BlockTable tb;
  EXPECT_EQ(bm.AcquirePrefix(b, &tb), 0);
}

TEST(BlockManager, EvictsLeastRecentlyUsedCachedBlocks) {
  BlockManager bm(4, 2, true);
  std::vector<int32_t> a = {1, 2, 3, 4, 5};
  BlockTable ta;
  bm.AcquirePrefix(a, &ta);
  ASSERT_TRUE(bm.EnsureCapacity(&ta, 5));
  bm.CommitFullBlocks(a, 5, &ta);
  bm.Free(&ta);
  EXPECT_EQ(bm.num_available(), 4) << "cached blocks stay available";
  BlockTable tb;
  ASSERT_TRUE(bm.EnsureCapacity(&tb, 8));  // needs every block: evicts the cached ones
  bm.Free(&tb);
  BlockTable tc;
  EXPECT_EQ(bm.AcquirePrefix(a, &tc), 0) << "evicted blocks are no longer found";
}

}  // namespace
}  // namespace ls

namespace ls {
namespace {

// Branch points: how far a prompt shares a cached chain, into the cached block that follows it, and
// that an evicted block no longer counts.
TEST(BlockManagerBranches, CommonPrefixReachesIntoTheNextCachedBlockUntilItIsEvicted) {
  BlockManager bm(4, 4, true, 1, /*track_branches=*/true);
  BlockTable a;
  const std::vector<int32_t> ta = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(bm.EnsureCapacity(&a, 8));
  bm.CommitFullBlocks(ta, 8, &a);
  bm.Free(&a);
  const std::vector<int32_t> tb = {1, 2, 3, 4, 5, 6, 9, 9, 9};
  const std::vector<uint64_t> cached = bm.CachedPrefix(tb, 0);
  ASSERT_EQ(cached.size(), 1u);
  EXPECT_EQ(bm.CommonPrefix(tb, 0, cached), 6) << "one cached block, then 2 tokens into the next";
  EXPECT_EQ(bm.CommonPrefix({7, 7}, 0, {}), 0);
  // Four fresh blocks evict both cached ones: the chain is gone.
  BlockTable c;
  ASSERT_TRUE(bm.EnsureCapacity(&c, 16));
  EXPECT_TRUE(bm.CachedPrefix(tb, 0).empty());
  EXPECT_EQ(bm.CommonPrefix(tb, 0, {}), 0);
  // Without tracking, only the cached full blocks count.
  BlockManager plain(4, 4, true);
  BlockTable d;
  ASSERT_TRUE(plain.EnsureCapacity(&d, 8));
  plain.CommitFullBlocks(ta, 8, &d);
  EXPECT_EQ(plain.CommonPrefix(tb, 0, plain.CachedPrefix(tb, 0)), 4);
}

}  // namespace
}  // namespace ls
