// CPU rotary position embedding, rotate-half convention over the whole head:
// pairs (i, i + hd/2) rotate by pos · θ^(−2i/hd).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace ls::cpu {

namespace {

// cos and sin of pos · θ^(−2i/hd) for positions [0, size), kept by the calling thread and
// extended as longer sequences arrive; each entry is computed by the same expression whenever
// it is (re)built, so results do not depend on which positions were seen before.
struct RopeTable {
  float theta = 0.f;
  int32_t head_dim = 0;
  int32_t positions = 0;
  std::vector<float> inv_freq, cos, sin;  // [positions, head_dim / 2]

  void Ensure(float th, int32_t hd, int32_t needed) {
    if (th != theta || hd != head_dim) {
      theta = th;
      head_dim = hd;
      positions = 0;
      inv_freq.resize(hd / 2);
      for (int32_t i = 0; i < hd / 2; ++i)
        inv_freq[i] = 1.0f / std::pow(th, static_cast<float>(2 * i) / static_cast<float>(hd));
    }
    if (needed <= positions) return;
    const int32_t half = hd / 2, grown = std::max(needed, 2 * positions);
    cos.resize(static_cast<size_t>(grown) * half);
    sin.resize(cos.size());
    for (int32_t p = positions; p < grown; ++p) {
      for (int32_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(p) * inv_freq[i];
        cos[static_cast<size_t>(p) * half + i] = std::cos(angle);
        sin[static_cast<size_t>(p) * half + i] = std::sin(angle);
      }
    }
    positions = grown;
  }
};

}  // namespace

void Rope(ThreadPool& pool, float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim,
          const int32_t* positions, float theta) {
  const int32_t half = head_dim / 2;
  thread_local RopeTable table;
  int32_t max_pos = 0;
  for (int64_t t = 0; t < num_tokens; ++t) max_pos = std::max(max_pos, positions[t]);
  table.Ensure(theta, head_dim, max_pos + 1);
  const RopeTable& tab = table;
  auto token = [&](int64_t t) {
    const float* c = tab.cos.data() + static_cast<size_t>(positions[t]) * half;
    const float* s = tab.sin.data() + static_cast<size_t>(positions[t]) * half;
    for (int32_t h = 0; h < num_heads; ++h) {
      float* v = x + (t * num_heads + h) * head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  };
  pool.ParallelForRanges(num_tokens, static_cast<int64_t>(num_heads) * head_dim, 16384, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) token(t);
  });
}

}  // namespace ls::cpu
