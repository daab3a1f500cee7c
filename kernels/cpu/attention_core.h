// The inner step of CPU paged attention (the kernel Attend, attention_simd.cc, compiled for every
// SIMD target): one token's query heads of one KV group against that KV head's cached positions
// first .. ctx - 1, any head_dim. Arithmetic: score = scale·q (rounded) against k, dim d into lane
// d % 16 (a product, then fused multiply-adds), the lanes summed by the vector layer's tree;
// softmax with the vector layer's e^x, its sum in lanes then the tree; out = Σ_pos p·v (fused, in
// position order) times 1/sum.
#pragma once

#include <cstdint>

namespace ls::cpu::internal {

struct AttendArgs {
  const float* q = nullptr;      // [group, head_dim] query heads of the group, contiguous
  const void* k = nullptr;       // the layer's K cache, offset to this KV head
  const void* v = nullptr;       // the layer's V cache, offset to this KV head
  bool bf16 = false;             // cache elements are BF16 (else float32)
  const int32_t* block_table = nullptr;
  int32_t block_size = 0;
  int64_t position_stride = 0;   // elements between consecutive cache slots (kv_heads · head_dim)
  int32_t group = 0;
  int32_t head_dim = 0;
  int32_t ctx = 0;               // positions attended: first .. ctx - 1
  int32_t first = 0;             // 0, or the start of a sliding window
  float scale = 1.f;
  float* scores = nullptr;       // scratch [group, len()]
  float* sums = nullptr;         // scratch [group]
  float* out = nullptr;          // [group, head_dim]

  // Positions attended.
  int32_t len() const { return ctx - first; }
  // Calls fn(i, offset) for positions first + i, i = 0 .. len() - 1, in order, one block-table
  // lookup per block; offset counts elements from k and v.
  template <typename Fn>
  void ForEachPosition(Fn&& fn) const {
    for (int32_t pos = first; pos < ctx;) {
      const int32_t b = pos / block_size, in_block = pos % block_size;
      const int64_t base = static_cast<int64_t>(block_table[b]) * block_size * position_stride;
      const int32_t n = ctx - pos < block_size - in_block ? ctx - pos : block_size - in_block;
      for (int32_t j = 0; j < n; ++j) fn(pos - first + j, base + (in_block + j) * position_stride);
      pos += n;
    }
  }
};

}  // namespace ls::cpu::internal
