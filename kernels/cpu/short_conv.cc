// CPU short convolution (ShortConvParams): per sequence and block of channels, each new token's
// causal depthwise convolution over the inputs before it (from this step, or the K − 1 kept in
// the sequence's state slot), then SiLU over the block's row of each token (vector_math.h), then
// the slot's inputs moved on to the step's last K − 1.
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/dtype.h"

namespace ls::cpu {

void ShortConv(ThreadPool& pool, const ShortConvParams& p) {
  const int64_t C = p.channels;
  const int32_t K = p.kernel, hist = K - 1;
  constexpr int64_t kChannelBlock = 256;
  const int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
  pool.ParallelFor(static_cast<int64_t>(p.num_seqs) * blocks, [&](int64_t task) {
    const AttentionSeq& s = p.seqs[task / blocks];
    const int64_t c0 = (task % blocks) * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    float* tail = p.cache.state + static_cast<int64_t>(s.state_slot) * p.cache.state_floats + p.tail_offset;
    const bool fresh = s.start_pos == 0;
    const float* in = p.in + static_cast<int64_t>(s.token_offset) * C;
    float* out = p.out + static_cast<int64_t>(s.token_offset) * C;
    // Input m of the sequence's new tokens (m < 0: from before the step).
    auto input = [&](int32_t m, int64_t c) -> float {
      if (m >= 0) return in[m * C + c];
      return fresh ? 0.f : tail[(hist + m) * C + c];
    };
    for (int64_t c = c0; c < c1; ++c) {
      float w[16] = {};
      for (int32_t j = 0; j < K; ++j) w[j] = LoadAsF32(p.weight->data, p.weight->dtype, c * K + j);
      for (int32_t i = 0; i < s.num_tokens; ++i) {
        float acc = 0.f;
        for (int32_t j = 0; j < K; ++j) acc += w[j] * input(i - hist + j, c);
        out[i * C + c] = acc;
      }
      float last[16];
      for (int32_t j = 0; j < hist; ++j) last[j] = input(s.num_tokens - hist + j, c);
      for (int32_t j = 0; j < hist; ++j) tail[j * C + c] = last[j];
    }
    for (int32_t i = 0; i < s.num_tokens; ++i) SiluRow(out + i * C + c0, out + i * C + c0, c1 - c0);
  });
}

}  // namespace ls::cpu
