// MergeByRank: the byte-pair-encoding loop both BPE models share — repeatedly merge the adjacent
// pair of symbols with the lowest rank, the leftmost on ties, until no adjacent pair has a rank.
// Short words rescan their pairs (fastest for them); long words (SentencePiece-style files with
// no pre-tokenizer encode whole lines as one word) use a heap with lazy invalidation, O(n log n).
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace ls::tok {

// `rank(left, right, &merged)` gives the rank of merging two adjacent symbols (and the merged
// symbol), or a negative value when they do not merge.
template <typename Symbol, typename RankFn>
void MergeByRank(std::vector<Symbol>* symbols, RankFn rank) {
  std::vector<Symbol>& sym = *symbols;
  constexpr size_t kRescanLimit = 48;
  if (sym.size() <= kRescanLimit) {
    Symbol merged{}, best_merged{};
    while (sym.size() > 1) {
      int64_t best = -1;
      size_t best_pos = 0;
      for (size_t p = 0; p + 1 < sym.size(); ++p) {
        const int64_t r = rank(sym[p], sym[p + 1], &merged);
        if (r >= 0 && (best < 0 || r < best)) {
          best = r;
          best_pos = p;
          best_merged = merged;
        }
      }
      if (best < 0) break;
      sym[best_pos] = best_merged;
      sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
    }
    return;
  }
  // Linked list over the original positions; a heap entry is (rank, left position, version of
  // the left symbol when pushed); stale entries are skipped when popped.
  const size_t n = sym.size();
  std::vector<int64_t> next(n), prev(n);
  std::vector<uint32_t> version(n, 0);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? static_cast<int64_t>(i + 1) : -1;
    prev[i] = static_cast<int64_t>(i) - 1;
  }
  struct Entry {
    int64_t rank;
    size_t pos;
    uint32_t left_version, right_version;
    size_t right;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  Symbol merged{};
  auto push = [&](size_t left) {
    if (next[left] < 0) return;
    const size_t right = static_cast<size_t>(next[left]);
    const int64_t r = rank(sym[left], sym[right], &merged);
    if (r >= 0) heap.push({r, left, version[left], version[right], right});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Entry e = heap.top();
    heap.pop();
    if (!alive[e.pos] || version[e.pos] != e.left_version || next[e.pos] != static_cast<int64_t>(e.right) ||
        version[e.right] != e.right_version)
      continue;
    rank(sym[e.pos], sym[e.right], &merged);
    sym[e.pos] = merged;
    ++version[e.pos];
    alive[e.right] = false;
    next[e.pos] = next[e.right];
    if (next[e.pos] >= 0) prev[static_cast<size_t>(next[e.pos])] = static_cast<int64_t>(e.pos);
    if (prev[e.pos] >= 0) push(static_cast<size_t>(prev[e.pos]));
    push(e.pos);
  }
  std::vector<Symbol> out;
  for (int64_t i = 0; i >= 0; i = next[static_cast<size_t>(i)]) out.push_back(sym[static_cast<size_t>(i)]);
  sym = std::move(out);
}

}  // namespace ls::tok
