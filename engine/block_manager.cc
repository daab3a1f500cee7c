// BlockManager implementation.
#include "engine/block_manager.h"

#include <algorithm>
#include <cassert>

#include "engine/fnv1a.h"

namespace ls {

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, int32_t num_pools,
                           bool track_branches)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      prefix_caching_(enable_prefix_caching),
      track_branches_(track_branches),
      blocks_(num_blocks),
      free_(std::max(num_pools, 1)),
      evictable_(std::max(num_pools, 1)),
      held_only_(std::max(num_pools, 1), 0) {
  const int32_t pools = static_cast<int32_t>(free_.size());
  const int32_t per_pool = num_blocks / pools;
  for (int32_t p = 0; p < pools; ++p) {
    free_[p].reserve(per_pool);
    for (int32_t b = (p + 1) * per_pool - 1; b >= p * per_pool; --b) free_[p].push_back(b);  // low ids first
  }
}

int32_t BlockManager::num_available() const {
  int32_t n = 0;
  for (int32_t p = 0; p < num_pools(); ++p) n += num_available(p);
  return n;
}

uint64_t BlockManager::ScopeSeed(PrefixScope scope) {
  uint64_t seed = 0;
  if (scope.pool != 0) {
    const int32_t id = scope.pool;
    seed = ChainHash(0x706f6f6c /* "pool" */, &id, 1);
  }
  if (scope.salt != 0) {
    const int32_t halves[2] = {static_cast<int32_t>(scope.salt), static_cast<int32_t>(scope.salt >> 32)};
    seed = ChainHash(seed ^ 0x73616c74 /* "salt" */, halves, 2);
  }
  return seed;
}

uint64_t BlockManager::ChainHash(uint64_t parent, const int32_t* tokens, int32_t n) {
  // FNV-1a over the parent hash and the token ids, then a final mix.
  uint64_t h = kFnv1aOffset ^ parent;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = Fnv1aByte(h, static_cast<uint8_t>(v >> (8 * i)));
  };
  mix(parent);
  for (int32_t i = 0; i < n; ++i) mix(static_cast<uint32_t>(tokens[i]));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

int32_t BlockManager::TakeBlock(int32_t pool) {
  int32_t b;
  if (!free_[pool].empty()) {
    b = free_[pool].back();
    free_[pool].pop_back();
  } else if (!evictable_[pool].empty()) {
    b = evictable_[pool].front();
    evictable_[pool].pop_front();
    Uncache(b);
  } else {
    return -1;
  }
  blocks_[b].ref = 1;
  return b;
}

void BlockManager::Uncache(int32_t b) {
  Block& blk = blocks_[b];
  cache_.erase(blk.hash);
  if (blk.child_pos >= 0) {  // swap-remove from its parent's children
    std::vector<int32_t>& siblings = children_.at(blk.parent);
    siblings[blk.child_pos] = siblings.back();
    blocks_[siblings.back()].child_pos = blk.child_pos;
    siblings.pop_back();
    if (siblings.empty()) children_.erase(blk.parent);
    blk.child_pos = -1;
  }
  blk.cached = false;
  blk.tokens.clear();
}

int32_t BlockManager::num_held_only() const {
  int32_t n = 0;
  for (int32_t h : held_only_) n += h;
  return n;
}

void BlockManager::ChangeRefs(int32_t b, int32_t dref, int32_t dholds) {
  Block& blk = blocks_[b];
  const bool was = blk.ref > 0 && blk.ref == blk.holds;
  blk.ref += dref;
  blk.holds += dholds;
  const bool is = blk.ref > 0 && blk.ref == blk.holds;
  held_only_[b / pool_blocks()] += static_cast<int32_t>(is) - static_cast<int32_t>(was);
}

void BlockManager::Hold(int32_t b) {
  assert(blocks_[b].ref > 0);
  ChangeRefs(b, 1, 1);
}

void BlockManager::Unhold(int32_t b) {
  assert(blocks_[b].holds > 0);
  ChangeRefs(b, 0, -1);
  Release(b);
}

void BlockManager::Release(int32_t b) {
  Block& blk = blocks_[b];
  assert(blk.ref > 0);
  ChangeRefs(b, -1, 0);
  if (blk.ref > 0) return;
  const int32_t pool = b / pool_blocks();
  if (blk.cached) {
    evictable_[pool].push_back(b);
    blk.lru = std::prev(evictable_[pool].end());
  } else {
    free_[pool].push_back(b);
  }
}

std::vector<uint64_t> BlockManager::CachedPrefix(const std::vector<int32_t>& tokens, PrefixScope scope) const {
  std::vector<uint64_t> hashes;
  if (!prefix_caching_) return hashes;
  const int32_t pool = scope.pool;
  const int32_t full = static_cast<int32_t>(tokens.size()) / block_size_;
  uint64_t parent = ScopeSeed(scope);
  for (int32_t i = 0; i < full; ++i) {
    const int32_t* t = tokens.data() + static_cast<size_t>(i) * block_size_;
    const uint64_t h = ChainHash(parent, t, block_size_);
    auto it = cache_.find(h);
    if (it == cache_.end() || it->second / pool_blocks() != pool) break;
    const Block& blk = blocks_[it->second];
    if (!std::equal(blk.tokens.begin(), blk.tokens.end(), t)) break;  // hash collision
    hashes.push_back(h);
    parent = h;
  }
  return hashes;
}

void BlockManager::AcquireBlocks(const std::vector<uint64_t>& cached, int32_t num_blocks, BlockTable* table) {
  assert(table->blocks.empty() && num_blocks <= static_cast<int32_t>(cached.size()));
  for (int32_t i = 0; i < num_blocks; ++i) {
    const int32_t b = cache_.at(cached[i]);
    Block& blk = blocks_[b];
    if (blk.ref == 0) evictable_[table->pool].erase(blk.lru);
    ChangeRefs(b, 1, 0);
    table->blocks.push_back(b);
    table->hashes.push_back(cached[i]);
  }
}

int32_t BlockManager::AcquirePrefix(const std::vector<int32_t>& tokens, BlockTable* table) {
  if (!prefix_caching_) return 0;
  const int32_t n = static_cast<int32_t>(tokens.size());
  const std::vector<uint64_t> cached = CachedPrefix(tokens, table->scope());
  // Full blocks that end before the last token.
  const int32_t blocks = std::min<int32_t>(static_cast<int32_t>(cached.size()), (n - 1) / block_size_);
  AcquireBlocks(cached, blocks, table);
  RecordLookup(n, static_cast<int64_t>(blocks) * block_size_);
  return blocks * block_size_;
}

int32_t BlockManager::CommonPrefix(const std::vector<int32_t>& tokens, PrefixScope scope,
                                   const std::vector<uint64_t>& cached) const {
  const int32_t pool = scope.pool;
  const int32_t k = static_cast<int32_t>(cached.size());
  const int32_t start = k * block_size_;
  const int32_t rest = std::min<int32_t>(block_size_, static_cast<int32_t>(tokens.size()) - start);
  int32_t best = 0;
  auto children = children_.find(PrefixHash(scope, cached, k));
  if (children == children_.end()) return start;
  for (int32_t child : children->second) {
    if (child / pool_blocks() != pool) continue;
    const std::vector<int32_t>& t = blocks_[child].tokens;
    const int32_t same = static_cast<int32_t>(
        std::mismatch(t.begin(), t.begin() + rest, tokens.begin() + start).first - t.begin());
    best = std::max(best, same);
  }
  return start + best;
}

int32_t BlockManager::BlocksNeeded(const BlockTable& table, int32_t num_tokens) const {
  const int32_t need = (num_tokens + block_size_ - 1) / block_size_;
  return std::max(0, need - static_cast<int32_t>(table.blocks.size()));
}

bool BlockManager::EnsureCapacity(BlockTable* table, int32_t num_tokens) {
  const int32_t add = BlocksNeeded(*table, num_tokens);
  if (add > num_available(table->pool)) return false;
  for (int32_t i = 0; i < add; ++i) table->blocks.push_back(TakeBlock(table->pool));
  return true;
}

void BlockManager::CommitFullBlocks(const std::vector<int32_t>& tokens, int32_t num_computed, BlockTable* table) {
  if (!prefix_caching_) return;
  const int32_t full = std::min<int32_t>(num_computed / block_size_, static_cast<int32_t>(table->blocks.size()));
  for (int32_t i = static_cast<int32_t>(table->hashes.size()); i < full; ++i) {
    const uint64_t parent = i == 0 ? ScopeSeed(table->scope()) : table->hashes[i - 1];
    const int32_t* t = tokens.data() + static_cast<size_t>(i) * block_size_;
    const uint64_t h = ChainHash(parent, t, block_size_);
    table->hashes.push_back(h);
    Block& blk = blocks_[table->blocks[i]];
    if (blk.cached || cache_.count(h)) continue;  // an identical block is already cached
    blk.cached = true;
    blk.hash = h;
    blk.parent = parent;
    if (track_branches_) {
      std::vector<int32_t>& siblings = children_[parent];
      blk.child_pos = static_cast<int32_t>(siblings.size());
      siblings.push_back(table->blocks[i]);
    }
    blk.tokens.assign(t, t + block_size_);
    cache_[h] = table->blocks[i];
  }
}

void BlockManager::Free(BlockTable* table) {
  // Release in reverse so the tail of a sequence is evicted before its (more shareable) head.
  for (auto it = table->blocks.rbegin(); it != table->blocks.rend(); ++it) Release(*it);
  table->blocks.clear();
  table->hashes.clear();
}

}  // namespace ls
