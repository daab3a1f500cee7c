// CPU rotary position embedding (RopeParams): rotate-half pairs (i, i + r/2) or interleaved
// pairs (2i, 2i + 1) over the first r = rotary_dim dims of each head, pair i turning by
// pos · inv_freq[i], with cos and sin scaled by attention_scaling.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace ls::cpu {

namespace {

// cos and sin of pos · inv_freq[i] (times the scaling) for positions [0, size), kept by the
// calling thread for the last frequency table seen and extended as longer sequences arrive;
// each entry is computed by the same expression whenever it is (re)built, so results do not
// depend on which positions were seen before.
struct RopeTable {
  std::vector<float> inv_freq;
  float scaling = 1.f;
  int32_t positions = 0;
  std::vector<float> cos, sin;  // [positions, inv_freq.size()]

  void Ensure(const float* freq, int32_t half, float attention_scaling, int32_t needed) {
    if (static_cast<int32_t>(inv_freq.size()) != half || attention_scaling != scaling ||
        !std::equal(inv_freq.begin(), inv_freq.end(), freq)) {
      inv_freq.assign(freq, freq + half);
      scaling = attention_scaling;
      positions = 0;
    }
    if (needed <= positions) return;
    const int32_t grown = std::max(needed, 2 * positions);
    cos.resize(static_cast<size_t>(grown) * half);
    sin.resize(cos.size());
    for (int32_t p = positions; p < grown; ++p) {
      for (int32_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(p) * inv_freq[i];
        cos[static_cast<size_t>(p) * half + i] = std::cos(angle) * scaling;
        sin[static_cast<size_t>(p) * half + i] = std::sin(angle) * scaling;
      }
    }
    positions = grown;
  }
};

}  // namespace

void Rope(ThreadPool& pool, float* x, int64_t num_tokens, const int32_t* positions, const RopeParams& p) {
  const int32_t half = p.rotary_dim / 2, hd = p.head_dim, heads = p.num_heads;
  if (half == 0 || num_tokens == 0) return;
  thread_local RopeTable table;
  int32_t max_pos = 0;
  for (int64_t t = 0; t < num_tokens; ++t) max_pos = std::max(max_pos, positions[t]);
  table.Ensure(p.inv_freq, half, p.attention_scaling, max_pos + 1);
  const RopeTable& tab = table;
  // Rotate-half pairs are `half` apart, interleaved pairs adjacent.
  const int32_t stride = p.interleaved ? 2 : 1, partner = p.interleaved ? 1 : half;
  auto token = [&](int64_t t) {
    const float* c = tab.cos.data() + static_cast<size_t>(positions[t]) * half;
    const float* s = tab.sin.data() + static_cast<size_t>(positions[t]) * half;
    for (int32_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * hd;
      for (int32_t i = 0; i < half; ++i) {
        float* a = v + i * stride;
        const float x0 = a[0], x1 = a[partner];
        a[0] = x0 * c[i] - x1 * s[i];
        a[partner] = x1 * c[i] + x0 * s[i];
      }
    }
  };
  pool.ParallelForRanges(num_tokens, static_cast<int64_t>(heads) * p.rotary_dim, 16384, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) token(t);
  });
}

}  // namespace ls::cpu
