// CPU rotary position embedding, rotate-half convention over the whole head:
// pairs (i, i + hd/2) rotate by pos · θ^(−2i/hd).
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace ls::cpu {

void Rope(ThreadPool& pool, float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim,
          const int32_t* positions, float theta) {
  const int32_t half = head_dim / 2;
  std::vector<float> inv_freq(half);
  for (int32_t i = 0; i < half; ++i) {
    inv_freq[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  }
  auto token = [&](int64_t t) {
    const float pos = static_cast<float>(positions[t]);
    for (int32_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];
      const float c = std::cos(angle), s = std::sin(angle);
      for (int32_t h = 0; h < num_heads; ++h) {
        float* v = x + (t * num_heads + h) * head_dim;
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  };
  if (num_tokens < 4) {
    for (int64_t t = 0; t < num_tokens; ++t) token(t);
  } else {
    pool.ParallelFor(num_tokens, token);
  }
}

}  // namespace ls::cpu
