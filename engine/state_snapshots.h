// StateSnapshots: the recurrent half of the prefix cache for models with linear-attention (KDA)
// layers. A cached prefix is useful to such a model only together with its recurrent state at the
// prefix's end, so the state of a sequence is copied, at chosen positions, into snapshot slots
// (state slots beyond the running sequences' ones). A snapshot at position p stands for the first
// p tokens: the full KV blocks before p are found through the BlockManager's prefix cache by their
// chain hash; the block p falls in (when p is not on a block boundary) is held by the snapshot, and
// a sequence resuming from it gets a copy of that block. Snapshots are kept per pool (a rank's
// cache) and evicted least-recently-used when their slots run out; one whose full blocks were
// evicted is never found again and goes the same way.
// Pure bookkeeping: slot and block numbers only, the engine makes the copies. Not thread-safe; the
// engine loop owns it.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"

namespace ls {

// A snapshot found for a prompt.
struct SnapshotHit {
  int32_t position = 0;  // tokens it stands for
  int32_t slot = -1;     // its state slot, numbered in its pool's cache
  int32_t block = -1;    // the block holding its last partial block's KV (-1 on a block boundary)
};

class StateSnapshots {
 public:
  // slots_per_pool snapshot slots in each of num_pools pools, numbered first_slot,
  // first_slot + 1, … in each pool's cache. interval: a snapshot every that many prompt tokens
  // (a multiple of the block size; 0: none on the way, only at branch points and prompt ends).
  StateSnapshots(BlockManager* blocks, int32_t slots_per_pool, int32_t first_slot, int32_t num_pools,
                 int32_t interval);

  int32_t slots_per_pool() const { return slots_per_pool_; }
  int32_t interval() const { return interval_; }

  // The deepest snapshot of `scope` (its pool, and its salt through the chain hashes) standing for
  // a start of `tokens` no longer than max_position. `cached`: BlockManager::CachedPrefix(tokens,
  // scope). Marks it recently used.
  std::optional<SnapshotHit> Find(const std::vector<int32_t>& tokens, PrefixScope scope,
                                  const std::vector<uint64_t>& cached, int32_t max_position);
  // How many leading tokens of `tokens` a snapshot's prefix in `scope` shares with it, counting
  // only the partial block after the cached full blocks (as BlockManager::CommonPrefix does).
  int32_t CommonPrefix(const std::vector<int32_t>& tokens, PrefixScope scope,
                       const std::vector<uint64_t>& cached) const;

  // Records a snapshot of a sequence at `position` (its first `position` tokens, all with their KV
  // in its table, full blocks committed). Returns the slot to copy the sequence's state into, or -1
  // when that prefix has one already (then only marked used). Evicts the least recently used
  // snapshot of the pool when all its slots are taken.
  int32_t Take(const std::vector<int32_t>& tokens, int32_t position, const BlockTable& table);

  // Evicts the least recently used snapshot of `pool` that holds a KV block, giving the block back
  // (a sequence short of blocks comes first); false when none holds one.
  bool EvictBlockHolder(int32_t pool);

  // Statistics: snapshots held now, taken and evicted since the start.
  int32_t num_held() const { return static_cast<int32_t>(snaps_.size()); }
  int64_t num_taken() const { return taken_; }
  int64_t num_evicted() const { return evicted_; }

 private:
  struct Snapshot {
    int32_t pool = 0;
    uint64_t parent = 0;          // chain hash of the full blocks before `position`
    std::vector<int32_t> tail;    // the tokens after them, up to `position`
    int32_t position = 0;
    int32_t slot = -1;
    int32_t block = -1;           // held in the BlockManager while the snapshot lives
    std::list<int32_t>::iterator lru;
  };
  // Snapshots under `parent` in `pool` whose tail starts tokens[start..] (and fits in it).
  template <typename Fn>
  void ForEachMatch(const std::vector<int32_t>& tokens, int32_t pool, uint64_t parent, int32_t start, Fn fn) const;
  void Evict(int32_t id);

  BlockManager* blocks_;
  int32_t slots_per_pool_;
  int32_t interval_;
  std::vector<std::vector<int32_t>> free_slots_;  // [pool]
  std::vector<std::list<int32_t>> lru_;           // [pool] snapshot ids; front = least recently used
  std::unordered_map<int32_t, Snapshot> snaps_;   // id -> snapshot
  std::unordered_multimap<uint64_t, int32_t> by_parent_;
  int32_t next_id_ = 0;
  int64_t taken_ = 0;
  int64_t evicted_ = 0;
};

}  // namespace ls
