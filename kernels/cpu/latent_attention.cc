// CPU latent attention (MLA, absorbed form; LatentAttentionParams): stores the step's latent rows
// [c | k_rope] in their cache slots (float32, or BF16 rounded to nearest even), then for every new
// token a causal softmax per head over the cached rows of its sequence and Σ softmax · c per head,
// one item per (token, group of kLatentGroup heads) whose microkernels (latent_attention_core.h)
// read each cached row once for the group. Also the expanded form's row moves: StoreLatentRows
// (the store alone) and LoadLatentRows (cached rows as float32).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/latent_attention_core.h"
#include "kernels/dtype.h"

namespace ls::cpu {
namespace {

using internal::kLatentGroup;

// Element offset of a sequence's cache row `pos` (rows of `width` elements).
inline int64_t RowOffset(const KvLayer& c, const AttentionSeq& s, int32_t pos, int32_t width) {
  return (static_cast<int64_t>(s.block_table[pos / c.block_size]) * c.block_size + pos % c.block_size) * width;
}

inline const void* RowAt(const KvLayer& c, int64_t offset) {
  return c.dtype == DType::kBF16 ? static_cast<const void*>(static_cast<const uint16_t*>(c.k) + offset)
                                 : static_cast<const void*>(static_cast<const float*>(c.k) + offset);
}

// (sequence index, token index within it) of every new token.
std::vector<std::pair<int32_t, int32_t>> Tokens(const AttentionSeq* seqs, int32_t num_seqs, int64_t* positions) {
  std::vector<std::pair<int32_t, int32_t>> tokens;
  *positions = 0;
  for (int32_t si = 0; si < num_seqs; ++si)
    for (int32_t i = 0; i < seqs[si].num_tokens; ++i) {
      tokens.emplace_back(si, i);
      *positions += seqs[si].start_pos + i + 1;
    }
  return tokens;
}

void Store(ThreadPool& pool, const LatentAttentionParams& p, const std::vector<std::pair<int32_t, int32_t>>& tokens) {
  const int32_t L = p.latent_dim, R = p.rope_dim, W = L + R;
  const bool bf16 = p.cache.dtype == DType::kBF16;
  pool.ParallelForRanges(static_cast<int64_t>(tokens.size()), W, 8192, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const AttentionSeq& s = p.seqs[tokens[t].first];
      const int64_t row = s.token_offset + tokens[t].second;
      const int64_t off = RowOffset(p.cache, s, s.start_pos + tokens[t].second, W);
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
}

// Token i of sequence s, heads h0 .. h0 + G − 1.
void Attend(const LatentAttentionParams& p, const AttentionSeq& s, int32_t i, int32_t h0, int32_t G) {
  const int32_t L = p.latent_dim, R = p.rope_dim, W = L + R, H = p.num_heads;
  const int64_t t = s.token_offset + i;
  const int32_t ctx = s.start_pos + i + 1;
  const size_t elem = DTypeSize(p.cache.dtype);
  thread_local std::vector<const void*> rows;  // [2, ctx]: each row's latent, then its rope key
  thread_local std::vector<float> scores;      // [G, ctx]
  rows.resize(2 * static_cast<size_t>(ctx));
  scores.resize(static_cast<size_t>(G) * ctx);
  for (int32_t pos = 0; pos < ctx;) {  // one block-table lookup per block
    const int32_t in_block = pos % p.cache.block_size, n = std::min(ctx - pos, p.cache.block_size - in_block);
    const auto* base = static_cast<const unsigned char*>(RowAt(p.cache, RowOffset(p.cache, s, pos, W)));
    for (int32_t j = 0; j < n; ++j) {
      rows[pos + j] = base + static_cast<size_t>(j) * W * elem;
      rows[ctx + pos + j] = base + (static_cast<size_t>(j) * W + L) * elem;
    }
    pos += n;
  }
  const float* qa[kLatentGroup];
  const float* qb[kLatentGroup];
  float* out[kLatentGroup];
  float inv[kLatentGroup];
  for (int32_t g = 0; g < G; ++g) {
    qa[g] = p.q_latent + (t * H + h0 + g) * L;
    qb[g] = p.q_rope + (t * H + h0 + g) * p.q_rope_stride;
    out[g] = p.out + (t * H + h0 + g) * L;
  }
  internal::LatentRows r{rows.data(), rows.data() + ctx, ctx, L, R, p.cache.dtype == DType::kBF16};
  internal::LatentScores(qa, qb, G, r, p.scale, scores.data(), ctx);
  for (int32_t g = 0; g < G; ++g) {
    float* sc = scores.data() + static_cast<size_t>(g) * ctx;
    inv[g] = 1.f / internal::LatentExpSum(sc, ctx, internal::LatentMax(sc, ctx));
  }
  r.nb = 0;
  internal::LatentValues(scores.data(), ctx, G, r, out, nullptr, inv);
}

}  // namespace

void StoreLatentRows(ThreadPool& pool, const LatentAttentionParams& p) {
  int64_t positions = 0;
  Store(pool, p, Tokens(p.seqs, p.num_seqs, &positions));
}

void PagedLatentAttention(ThreadPool& pool, const LatentAttentionParams& p) {
  const int32_t W = p.latent_dim + p.rope_dim, H = p.num_heads;
  int64_t positions = 0;
  const auto tokens = Tokens(p.seqs, p.num_seqs, &positions);
  const int64_t T = static_cast<int64_t>(tokens.size());
  Store(pool, p, tokens);
  // One item per (token, group of heads).
  const int32_t groups = (H + kLatentGroup - 1) / kLatentGroup;
  const int64_t values_per_item = positions * W * kLatentGroup / std::max<int64_t>(1, T);
  pool.ParallelForRanges(T * groups, values_per_item, 8192, [&](int64_t a, int64_t b) {
    for (int64_t item = a; item < b; ++item) {
      const auto [si, i] = tokens[item / groups];
      const int32_t h0 = static_cast<int32_t>(item % groups) * kLatentGroup;
      Attend(p, p.seqs[si], i, h0, std::min(kLatentGroup, H - h0));
    }
  });
}

void LoadLatentRows(ThreadPool& pool, const KvLayer& cache, int32_t width, const AttentionSeq& seq, int32_t first,
                    int32_t count, float* out) {
  pool.ParallelForRanges(count, width, 16384, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      const int64_t off = RowOffset(cache, seq, first + static_cast<int32_t>(i), width);
      float* dst = out + i * width;
      if (cache.dtype == DType::kBF16) {
        const uint16_t* src = static_cast<const uint16_t*>(cache.k) + off;
        for (int32_t j = 0; j < width; ++j) dst[j] = Bf16ToF32(src[j]);
      } else {
        std::memcpy(dst, static_cast<const float*>(cache.k) + off, static_cast<size_t>(width) * sizeof(float));
      }
    }
  });
}

}  // namespace ls::cpu
