// The inner step of CPU paged attention (the kernel Attend, attention_simd.cc, compiled for every
// SIMD target): the query heads of one or more consecutive KV groups, for one token or a tile of
// consecutive tokens of one sequence, against those KV heads' cached positions (token t: first ..
// ctx + t - 1), any head_dim. A tile passes over the cache once for all its tokens and KV heads;
// each token and head gets the bits it gets alone. Arithmetic: score = scale·q (rounded) against
// k, dim d into lane d % 16 (a product, then fused multiply-adds), the lanes summed by the vector
// layer's tree; softmax with the vector layer's e^x, its sum in lanes then the tree;
// out = Σ_pos p·v (fused, in position order) times 1/sum.
#pragma once

#include <cstdint>

namespace ls::cpu::internal {

struct AttendArgs {
  const float* q = nullptr;      // [heads(), head_dim] query heads, contiguous (token 0)
  const void* k = nullptr;       // the layer's K cache, offset to the first KV head served
  const void* v = nullptr;       // the layer's V cache, offset to the first KV head served
  bool bf16 = false;             // cache elements are BF16 (else float32)
  const int32_t* block_table = nullptr;
  int32_t block_size = 0;
  int64_t position_stride = 0;   // elements between consecutive cache slots (all the layer's KV
                                 // heads · head_dim)
  int32_t group = 0;             // query heads of a KV head
  int32_t kv_heads = 1;          // consecutive KV heads served: head k's rows start k · head_dim
                                 // after k and v, its query group follows the one before in q
  int32_t head_dim = 0;
  int32_t ctx = 0;           // positions token 0 attends: first .. ctx - 1
  int32_t first = 0;         // 0, or the start of a sliding window (then tokens is 1)
  int32_t tokens = 1;        // tokens of the tile: token t attends first .. ctx + t - 1
  int64_t token_stride = 0;  // elements from one token's q (and out) to the next's
  float scale = 1.f;
  float* scores = nullptr;  // scratch [tokens, heads(), span()]
  float* sums = nullptr;    // scratch [tokens, heads()]
  float* acc = nullptr;     // scratch [tokens, heads(), head_dim rounded up to 16]
  float* out = nullptr;     // [heads(), head_dim] (token 0)

  // Positions token 0 attends, and the tile's last token.
  int32_t len() const { return ctx - first; }
  int32_t span() const { return len() + tokens - 1; }
  // Query heads served: the groups of every KV head.
  int32_t heads() const { return kv_heads * group; }
  // Scratch floats a tile needs (scores, sums, acc, in that order) for `heads` query heads.
  static int64_t ScratchFloats(int32_t tokens, int32_t heads, int32_t head_dim, int32_t span) {
    return int64_t{tokens} * heads * (span + 1 + (head_dim + 15) / 16 * 16);
  }
  // Calls fn(i, offset) for positions first + i, i = 0 .. span() - 1, in order, one block-table
  // lookup per block; offset counts elements from k and v.
  template <typename Fn>
  void ForEachPosition(Fn&& fn) const {
    const int32_t end = ctx + tokens - 1;
    for (int32_t pos = first; pos < end;) {
      const int32_t b = pos / block_size, in_block = pos % block_size;
      const int64_t base = static_cast<int64_t>(block_table[b]) * block_size * position_stride;
      const int32_t n = end - pos < block_size - in_block ? end - pos : block_size - in_block;
      for (int32_t j = 0; j < n; ++j) fn(pos - first + j, base + (in_block + j) * position_stride);
      pos += n;
    }
  }
};

}  // namespace ls::cpu::internal
