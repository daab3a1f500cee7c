// CPU paged attention: stores the step's K/V into their cache slots (float32, or BF16 rounded to
// nearest even), then for every new token and query head a causal softmax over the cached
// positions of its sequence, or its last sliding_window ones (GQA: query head h reads KV head
// h / (H / Hkv)). Works for prefill chunks and single-token decode alike.
#include <algorithm>
#include <vector>

#include "kernels/cpu/attention_core.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/simd/kernel_table.h"
#include "kernels/dtype.h"

namespace ls::cpu {
namespace {

// Address of (position, kv head) inside a sequence's paged cache.
inline int64_t SlotOffset(const AttentionSeq& s, const KvLayer& c, int32_t pos, int32_t kv_heads,
                          int32_t hd, int32_t kvh) {
  const int32_t block = s.block_table[pos / c.block_size];
  const int32_t in_block = pos % c.block_size;
  return ((static_cast<int64_t>(block) * c.block_size + in_block) * kv_heads + kvh) * hd;
}

const void* RowAt(const void* base, bool bf16, int64_t offset) {
  return bf16 ? static_cast<const void*>(static_cast<const uint16_t*>(base) + offset)
              : static_cast<const void*>(static_cast<const float*>(base) + offset);
}

}  // namespace

void PagedAttention(ThreadPool& pool, const AttentionParams& p) {
  const int32_t H = p.num_heads, Hkv = p.num_kv_heads, hd = p.head_dim;
  const int32_t group = H / Hkv;
  const int64_t kv_width = static_cast<int64_t>(Hkv) * hd;
  const bool bf16 = p.cache.dtype == DType::kBF16;

  std::vector<std::pair<int32_t, int32_t>> tokens;  // (seq index, token index within seq)
  int64_t positions = 0;                            // positions attended, over all tokens
  for (int32_t si = 0; si < p.num_seqs; ++si) {
    for (int32_t i = 0; i < p.seqs[si].num_tokens; ++i) {
      tokens.emplace_back(si, i);
      positions += p.seqs[si].start_pos + i + 1;
    }
  }
  const int64_t num_tokens = static_cast<int64_t>(tokens.size());

  // 1. Write the new keys and values (prefill chunks write many: spread over the threads).
  pool.ParallelForRanges(num_tokens, kv_width, 8192, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const AttentionSeq& s = p.seqs[tokens[t].first];
      const int32_t i = tokens[t].second;
      const int64_t row = s.token_offset + i;
      for (int32_t kvh = 0; kvh < Hkv; ++kvh) {
        const int64_t off = SlotOffset(s, p.cache, s.start_pos + i, Hkv, hd, kvh);
        const float* k = p.k_new + row * kv_width + kvh * hd;
        const float* v = p.v_new + row * kv_width + kvh * hd;
        if (bf16) {
          auto* kc = static_cast<uint16_t*>(p.cache.k) + off;
          auto* vc = static_cast<uint16_t*>(p.cache.v) + off;
          for (int32_t j = 0; j < hd; ++j) kc[j] = F32ToBf16(k[j]), vc[j] = F32ToBf16(v[j]);
        } else {
          std::copy_n(k, hd, static_cast<float*>(p.cache.k) + off);
          std::copy_n(v, hd, static_cast<float*>(p.cache.v) + off);
        }
      }
    }
  });

  // 2. One item per (tile of a sequence's consecutive new tokens, kv head, or all kv heads),
  // serving the kv heads' query groups: a tile reads its positions once for all its tokens (about
  // 32 query rows; one token under a sliding window, whose positions differ by token; fewer where
  // the rows' scores over a long context would pass 4 MiB of scratch). Short items (prefill over
  // short contexts) are grouped so that each task reads about 8K cached values.
  constexpr int64_t kTileScores = int64_t{1} << 20;
  const int32_t tile = p.sliding_window > 0 ? 1 : std::clamp(32 / group, 1, 8);
  std::vector<std::pair<int32_t, int32_t>> tiles;  // (first token's index in `tokens`, tokens)
  int64_t widest = 0;                              // the most scores of one KV head's query group in a tile
  for (int64_t t = 0; t < num_tokens;) {
    const AttentionSeq& s = p.seqs[tokens[t].first];
    const int64_t span = s.start_pos + s.num_tokens;  // at most, for any tile of the sequence
    const int32_t fit = static_cast<int32_t>(std::max<int64_t>(1, kTileScores / (int64_t{group} * span)));
    const int32_t n = std::min({tile, fit, s.num_tokens - tokens[t].second});
    tiles.emplace_back(static_cast<int32_t>(t), n);
    widest = std::max(widest, n * group * span);
    t += n;
  }
  // With tiles enough to keep the threads busy, an item serves every KV head: each cached
  // position's row of all KV heads is then read while it is at hand, not a KV head's slice of it at
  // a time (which left half the memory bandwidth unused). Where the scores of all heads would pass
  // the scratch bound, items stay one KV head wide.
  const bool whole_rows = static_cast<int64_t>(tiles.size()) >= 2 * pool.num_threads() && widest * Hkv <= kTileScores;
  const int32_t kv_per_item = whole_rows ? Hkv : 1;
  const int32_t kv_items = Hkv / kv_per_item;
  const KernelTable& kernels = ActiveKernels();
  auto attend = [&](int64_t item) {
    const auto [t0, n] = tiles[item / kv_items];
    const auto [si, i] = tokens[t0];
    const int32_t kvh = static_cast<int32_t>(item % kv_items) * kv_per_item;
    const AttentionSeq& s = p.seqs[si];
    const int64_t row = s.token_offset + i;
    thread_local std::vector<float> scratch;
    internal::AttendArgs a;
    a.ctx = s.start_pos + i + 1;  // causal: token i attends positions 0 .. start_pos + i
    if (p.sliding_window > 0) a.first = std::max(0, a.ctx - p.sliding_window);
    a.tokens = n;
    a.token_stride = static_cast<int64_t>(H) * hd;
    a.group = group;
    a.kv_heads = kv_per_item;
    a.head_dim = hd;
    a.scale = p.scale;
    a.q = p.q + (row * H + kvh * group) * hd;
    a.k = RowAt(p.cache.k, bf16, static_cast<int64_t>(kvh) * hd);
    a.v = RowAt(p.cache.v, bf16, static_cast<int64_t>(kvh) * hd);
    a.bf16 = bf16;
    a.block_table = s.block_table;
    a.block_size = p.cache.block_size;
    a.position_stride = kv_width;
    scratch.resize(static_cast<size_t>(internal::AttendArgs::ScratchFloats(n, a.heads(), hd, a.span())));
    a.scores = scratch.data();
    a.sums = a.scores + static_cast<int64_t>(n) * a.heads() * a.span();
    a.acc = a.sums + static_cast<int64_t>(n) * a.heads();
    a.out = p.out + (row * H + kvh * group) * hd;
    kernels.Attend(a);
  };
  const int64_t items = static_cast<int64_t>(tiles.size()) * kv_items;
  const int64_t values_per_item =
      positions * hd * kv_per_item / std::max<int64_t>(1, static_cast<int64_t>(tiles.size()));
  pool.ParallelForRanges(items, values_per_item, 8192, [&](int64_t t0, int64_t t1) {
    for (int64_t item = t0; item < t1; ++item) attend(item);
  });
}

}  // namespace ls::cpu
