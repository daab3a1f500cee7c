// StateSnapshots implementation.
#include "engine/state_snapshots.h"

#include <algorithm>
#include <cassert>

namespace ls {

StateSnapshots::StateSnapshots(BlockManager* blocks, int32_t slots_per_pool, int32_t first_slot, int32_t num_pools,
                               int32_t interval)
    : blocks_(blocks),
      slots_per_pool_(slots_per_pool),
      interval_(interval),
      free_slots_(std::max(num_pools, 1)),
      lru_(std::max(num_pools, 1)) {
  for (auto& f : free_slots_)
    for (int32_t s = first_slot + slots_per_pool - 1; s >= first_slot; --s) f.push_back(s);
}

template <typename Fn>
void StateSnapshots::ForEachMatch(const std::vector<int32_t>& tokens, int32_t pool, uint64_t parent, int32_t start,
                                  Fn fn) const {
  for (auto [it, end] = by_parent_.equal_range(parent); it != end; ++it) {
    const Snapshot& s = snaps_.at(it->second);
    if (s.pool != pool) continue;
    const size_t n = std::min(s.tail.size(), tokens.size() - start);
    const size_t same = std::mismatch(s.tail.begin(), s.tail.begin() + n, tokens.begin() + start).first - s.tail.begin();
    fn(it->second, s, static_cast<int32_t>(same));
  }
}

std::optional<SnapshotHit> StateSnapshots::Find(const std::vector<int32_t>& tokens, PrefixScope scope,
                                                const std::vector<uint64_t>& cached, int32_t max_position) {
  const int32_t bs = blocks_->block_size(), pool = scope.pool;
  // Deeper full blocks always mean deeper positions: the first level with a match has the best one.
  for (int32_t k = std::min<int32_t>(static_cast<int32_t>(cached.size()), max_position / bs); k >= 0; --k) {
    int32_t best = -1;
    ForEachMatch(tokens, pool, blocks_->PrefixHash(scope, cached, k), k * bs,
                 [&](int32_t id, const Snapshot& s, int32_t same) {
                   if (same == static_cast<int32_t>(s.tail.size()) && s.position <= max_position &&
                       (best < 0 || s.position > snaps_.at(best).position))
                     best = id;
                 });
    if (best < 0) continue;
    Snapshot& s = snaps_.at(best);
    lru_[pool].splice(lru_[pool].end(), lru_[pool], s.lru);
    return SnapshotHit{s.position, s.slot, s.block};
  }
  return std::nullopt;
}

int32_t StateSnapshots::CommonPrefix(const std::vector<int32_t>& tokens, PrefixScope scope,
                                     const std::vector<uint64_t>& cached) const {
  const int32_t k = static_cast<int32_t>(cached.size());
  int32_t best = 0;
  ForEachMatch(tokens, scope.pool, blocks_->PrefixHash(scope, cached, k), k * blocks_->block_size(),
               [&](int32_t, const Snapshot&, int32_t same) { best = std::max(best, same); });
  return k * blocks_->block_size() + best;
}

int32_t StateSnapshots::Take(const std::vector<int32_t>& tokens, int32_t position, const BlockTable& table) {
  const int32_t bs = blocks_->block_size(), k = position / bs, pool = table.pool;
  assert(position > 0 && static_cast<int32_t>(table.hashes.size()) >= k);
  const uint64_t parent = blocks_->PrefixHash(table.scope(), table.hashes, k);
  bool exists = false;
  ForEachMatch(tokens, pool, parent, k * bs, [&](int32_t, const Snapshot& s, int32_t same) {
    exists |= s.position == position && same == static_cast<int32_t>(s.tail.size());
  });
  if (exists || slots_per_pool_ == 0) return -1;
  if (free_slots_[pool].empty()) Evict(lru_[pool].front());
  Snapshot s;
  s.pool = pool;
  s.parent = parent;
  s.tail.assign(tokens.begin() + k * bs, tokens.begin() + position);
  s.position = position;
  s.slot = free_slots_[pool].back();
  free_slots_[pool].pop_back();
  if (position % bs != 0) {
    s.block = table.blocks[k];
    blocks_->Hold(s.block);
  }
  const int32_t id = next_id_++;
  lru_[pool].push_back(id);
  s.lru = std::prev(lru_[pool].end());
  by_parent_.emplace(parent, id);
  const int32_t slot = s.slot;
  snaps_.emplace(id, std::move(s));
  ++taken_;
  return slot;
}

bool StateSnapshots::EvictBlockHolder(int32_t pool) {
  for (int32_t id : lru_[pool])
    if (snaps_.at(id).block >= 0) {
      Evict(id);
      return true;
    }
  return false;
}

void StateSnapshots::Evict(int32_t id) {
  Snapshot& s = snaps_.at(id);
  for (auto [it, end] = by_parent_.equal_range(s.parent); it != end; ++it)
    if (it->second == id) {
      by_parent_.erase(it);
      break;
    }
  lru_[s.pool].erase(s.lru);
  free_slots_[s.pool].push_back(s.slot);
  if (s.block >= 0) blocks_->Unhold(s.block);
  snaps_.erase(id);
  ++evicted_;
}

}  // namespace ls
