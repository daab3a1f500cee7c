// BlockManager: bookkeeping of the paged KV cache — fixed-size blocks, a free list, each
// sequence's block table, and the prefix cache (full blocks keyed by a hash of their tokens and
// of everything before them, shared by reference count, evicted least-recently-used). The blocks
// may split into equal pools, one per rank of a group of processes (each rank's KV cache): a
// table takes all its blocks from its own pool, and a cached prefix is shared within a pool only.
// Pure bookkeeping: no tensors, no model. Not thread-safe; the engine loop owns it.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace ls {

// Where a chain of cached blocks lives: a pool, and the cache salt of the requests that share it
// (0: none). Chains of different scopes never share a block, so that a tenant's prompts never
// find, nor time, another's cached prefixes. A pool alone is a scope.
struct PrefixScope {
  PrefixScope(int32_t p = 0, uint64_t s = 0) : pool(p), salt(s) {}  // NOLINT(google-explicit-constructor)
  int32_t pool;
  uint64_t salt;
};

// A sequence's blocks. `hashes[i]` is the chain hash of block i once it is full and committed.
// `pool`: where its blocks come from (set while the table is empty).
struct BlockTable {
  std::vector<int32_t> blocks;
  std::vector<uint64_t> hashes;
  int32_t pool = 0;
  uint64_t salt = 0;  // the request's cache salt (PrefixScope)
  PrefixScope scope() const { return {pool, salt}; }
};

class BlockManager {
 public:
  // num_blocks: in all pools together (a multiple of num_pools); pool p holds blocks
  // [p·pool_blocks, (p+1)·pool_blocks).
  // track_branches: keep, per cached chain, the cached blocks that follow it (CommonPrefix needs
  // them; only models whose prefix cache takes state snapshots at branch points ask for it).
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, int32_t num_pools = 1,
               bool track_branches = false);

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t num_pools() const { return static_cast<int32_t>(free_.size()); }
  int32_t pool_blocks() const { return num_blocks_ / num_pools(); }
  // Blocks that can be handed out now (free, or cached and unreferenced), in all pools or in one.
  int32_t num_available() const;
  int32_t num_available(int32_t pool) const {
    return static_cast<int32_t>(free_[pool].size() + evictable_[pool].size());
  }
  int32_t num_used() const { return num_blocks_ - num_available(); }

  // For a sequence with an empty table: reuses cached blocks matching the longest full-block
  // prefix of `tokens`, never covering the last token (its logits must be computed). Returns
  // the number of tokens whose KV is now present.
  int32_t AcquirePrefix(const std::vector<int32_t>& tokens, BlockTable* table);

  // The pieces of AcquirePrefix, for callers that decide how much of a cached prefix to take (a
  // model with recurrent state resumes only where a state snapshot exists):
  // the chain hashes of the cached full blocks that start `tokens` in `pool` (looked up only);
  std::vector<uint64_t> CachedPrefix(const std::vector<int32_t>& tokens, PrefixScope scope) const;
  // the chain hash of the first `num_blocks` of them (the pool's seed for none; a table's committed
  // `hashes` serve as well);
  uint64_t PrefixHash(PrefixScope scope, const std::vector<uint64_t>& cached, int32_t num_blocks) const {
    return num_blocks == 0 ? ScopeSeed(scope) : cached[num_blocks - 1];
  }
  // takes the first `num_blocks` of them into an empty table;
  void AcquireBlocks(const std::vector<uint64_t>& cached, int32_t num_blocks, BlockTable* table);
  // and counts a lookup in the statistics.
  void RecordLookup(int64_t queried_tokens, int64_t hit_tokens) {
    queried_tokens_ += queried_tokens;
    hit_tokens_ += hit_tokens;
  }
  // How many leading tokens of `tokens` some cached chain of `pool` shares: the cached full blocks
  // (`cached`) and the longest common start with a cached block that follows them (with
  // track_branches; without, the cached full blocks alone).
  int32_t CommonPrefix(const std::vector<int32_t>& tokens, PrefixScope scope,
                       const std::vector<uint64_t>& cached) const;
  // One more holder of a block in use (a state snapshot keeps the block its position falls in),
  // and the release of that hold.
  void Hold(int32_t block);
  void Unhold(int32_t block);
  // Blocks of `pool` that only holds keep (given back when a sequence needs them): in use by no sequence.
  int32_t num_held_only(int32_t pool) const { return held_only_[pool]; }
  int32_t num_held_only() const;
  // Blocks to add so the table holds `num_tokens` tokens.
  int32_t BlocksNeeded(const BlockTable& table, int32_t num_tokens) const;
  // Grows the table to hold `num_tokens` tokens; false, changing nothing, if blocks run out.
  bool EnsureCapacity(BlockTable* table, int32_t num_tokens);
  // Registers in the prefix cache every block fully covered by the first `num_computed` tokens.
  void CommitFullBlocks(const std::vector<int32_t>& tokens, int32_t num_computed, BlockTable* table);
  // Releases every block of the table and clears it.
  void Free(BlockTable* table);

  // Prefix-cache statistics, in tokens: looked up on admission, and found.
  int64_t prefix_queried_tokens() const { return queried_tokens_; }
  int64_t prefix_hit_tokens() const { return hit_tokens_; }
  // Reference count of a block (tests).
  int32_t ref_count(int32_t block) const { return blocks_[block].ref; }

 private:
  struct Block {
    int32_t ref = 0;
    int32_t holds = 0;         // of `ref`, holds (Hold) rather than tables
    bool cached = false;       // registered in cache_ under `hash`
    uint64_t hash = 0;
    uint64_t parent = 0;          // the chain hash of the blocks before it
    int32_t child_pos = -1;       // its place in children_[parent] (track_branches)
    std::vector<int32_t> tokens;  // the block's tokens, to confirm hash hits
    std::list<int32_t>::iterator lru;  // position in evictable_ when ref == 0 && cached
  };
  static uint64_t ChainHash(uint64_t parent, const int32_t* tokens, int32_t n);
  // The parent hash of a scope's first blocks (0 for pool 0 unsalted), so that scopes never share
  // a prefix.
  static uint64_t ScopeSeed(PrefixScope scope);
  int32_t TakeBlock(int32_t pool);  // a fresh block (evicting the LRU cached one if needed); -1 if none
  void Release(int32_t b);
  // A change of a block's references by `dref`, `dholds` of them holds, keeping held_only_ right.
  void ChangeRefs(int32_t b, int32_t dref, int32_t dholds);
  void Uncache(int32_t b);  // out of cache_ (and children_) before reuse

  int32_t num_blocks_;
  int32_t block_size_;
  bool prefix_caching_;
  bool track_branches_;
  std::vector<Block> blocks_;
  std::vector<std::vector<int32_t>> free_;       // [pools] unreferenced, uncached
  std::vector<std::list<int32_t>> evictable_;    // [pools] unreferenced, cached; front = least recently used
  std::vector<int32_t> held_only_;               // [pools] blocks referenced by holds alone
  std::unordered_map<uint64_t, int32_t> cache_;  // chain hash -> block
  std::unordered_map<uint64_t, std::vector<int32_t>> children_;  // parent chain hash -> cached blocks after it
  int64_t queried_tokens_ = 0;
  int64_t hit_tokens_ = 0;
};

}  // namespace ls
