// The latent attention baseline (previous_latent_attention.h): the CPU op's code before the
// microkernels, unchanged but for its name.
#include "bench/previous_latent_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/vector_math.h"
#include "kernels/dtype.h"

namespace ls::bench {

using cpu::Axpy;
using cpu::Dot;

namespace {

constexpr int32_t kHeadsPerItem = 8;  // heads sharing one pass over a token's cached rows

// The first n values of cache row `pos` of a sequence (rows of `stride` values) as float32.
inline void LoadRow(const KvLayer& c, const AttentionSeq& s, int32_t pos, int32_t stride, int32_t n, float* row) {
  const int64_t off =
      (static_cast<int64_t>(s.block_table[pos / c.block_size]) * c.block_size + pos % c.block_size) * stride;
  if (c.dtype == DType::kBF16) {
    const auto* r = static_cast<const uint16_t*>(c.k) + off;
    for (int32_t i = 0; i < n; ++i) row[i] = Bf16ToF32(r[i]);
  } else {
    std::copy_n(static_cast<const float*>(c.k) + off, n, row);
  }
}

}  // namespace

void PreviousLatentAttention(ThreadPool& pool, const LatentAttentionParams& p) {
  const int32_t L = p.latent_dim, R = p.rope_dim, W = L + R, H = p.num_heads;
  const bool bf16 = p.cache.dtype == DType::kBF16;
  std::vector<std::pair<int32_t, int32_t>> tokens;  // (seq index, token index within seq)
  int64_t positions = 0;
  for (int32_t si = 0; si < p.num_seqs; ++si)
    for (int32_t i = 0; i < p.seqs[si].num_tokens; ++i) {
      tokens.emplace_back(si, i);
      positions += p.seqs[si].start_pos + i + 1;
    }
  const int64_t T = static_cast<int64_t>(tokens.size());

  // 1. The new rows.
  pool.ParallelForRanges(T, W, 8192, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const AttentionSeq& s = p.seqs[tokens[t].first];
      const int32_t pos = s.start_pos + tokens[t].second;
      const int64_t row = s.token_offset + tokens[t].second;
      const int64_t off = (static_cast<int64_t>(s.block_table[pos / p.cache.block_size]) * p.cache.block_size +
                           pos % p.cache.block_size) *
                          W;
      const float* c = p.c_new + row * L;
      const float* k = p.k_rope_new + row * R;
      if (bf16) {
        auto* dst = static_cast<uint16_t*>(p.cache.k) + off;
        for (int32_t j = 0; j < L; ++j) dst[j] = F32ToBf16(c[j]);
        for (int32_t j = 0; j < R; ++j) dst[L + j] = F32ToBf16(k[j]);
      } else {
        float* dst = static_cast<float*>(p.cache.k) + off;
        std::copy_n(c, L, dst);
        std::copy_n(k, R, dst + L);
      }
    }
  });

  // 2. One item per (token, group of heads).
  const int32_t groups = (H + kHeadsPerItem - 1) / kHeadsPerItem;
  auto attend = [&](int64_t item) {
    const auto [si, i] = tokens[item / groups];
    const int32_t h0 = static_cast<int32_t>(item % groups) * kHeadsPerItem, G = std::min(kHeadsPerItem, H - h0);
    const AttentionSeq& s = p.seqs[si];
    const int64_t t = s.token_offset + i;
    const int32_t ctx = s.start_pos + i + 1;
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>(G) * ctx + W);
    float* scores = scratch.data();  // [G, ctx]
    float* row = scores + static_cast<size_t>(G) * ctx;
    for (int32_t pos = 0; pos < ctx; ++pos) {
      LoadRow(p.cache, s, pos, W, W, row);
      for (int32_t g = 0; g < G; ++g) {
        const float* ql = p.q_latent + (t * H + h0 + g) * L;
        const float* qr = p.q_rope + (t * H + h0 + g) * p.q_rope_stride;
        scores[static_cast<size_t>(g) * ctx + pos] = (Dot(ql, row, L) + Dot(qr, row + L, R)) * p.scale;
      }
    }
    float sums[kHeadsPerItem];
    for (int32_t g = 0; g < G; ++g) {
      float* sc = scores + static_cast<size_t>(g) * ctx;
      const float mx = *std::max_element(sc, sc + ctx);
      float sum = 0.f;
      for (int32_t pos = 0; pos < ctx; ++pos) sum += (sc[pos] = std::exp(sc[pos] - mx));
      sums[g] = sum;
      std::fill_n(p.out + (t * H + h0 + g) * L, L, 0.f);
    }
    for (int32_t pos = 0; pos < ctx; ++pos) {
      LoadRow(p.cache, s, pos, W, L, row);
      for (int32_t g = 0; g < G; ++g)
        Axpy(scores[static_cast<size_t>(g) * ctx + pos], row, p.out + (t * H + h0 + g) * L, L);
    }
    for (int32_t g = 0; g < G; ++g) {
      float* o = p.out + (t * H + h0 + g) * L;
      const float inv = 1.f / sums[g];
      for (int32_t j = 0; j < L; ++j) o[j] *= inv;
    }
  };
  const int64_t items = T * groups;
  const int64_t values_per_item = positions * W * kHeadsPerItem / std::max<int64_t>(1, T);
  pool.ParallelForRanges(items, values_per_item, 8192, [&](int64_t a, int64_t b) {
    for (int64_t item = a; item < b; ++item) attend(item);
  });
}

}  // namespace ls::bench
