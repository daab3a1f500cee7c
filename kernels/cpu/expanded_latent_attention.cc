// CPU expanded MLA attention (ExpandedLatentAttentionParams): one sequence's new tokens against a
// tile of per-head keys [k_nope | k_rope] and values, one item per (head, block of kLatentGroup
// consecutive tokens) — each key and value row loaded once for the block by the microkernels of
// latent_attention_core.h — with the online softmax across tiles. A token's scores past its own
// position are computed with its block and then dropped (zero weight, exactly nothing added), so
// its result does not depend on which tokens share its block.
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/latent_attention_core.h"

namespace ls::cpu {
namespace {

using internal::kLatentGroup;

// Head h of tokens i0 .. i0 + G − 1 of the sequence.
void AttendBlock(const ExpandedLatentAttentionParams& p, int32_t h, int32_t i0, int32_t G) {
  const AttentionSeq& s = p.seq;
  const int32_t H = p.num_heads, nope = p.nope_dim, R = p.rope_dim, vd = p.v_dim, qh = nope + R;
  const int32_t keys = std::clamp(s.start_pos + i0 + G - 1 - p.first_key + 1, 0, p.num_keys);
  if (keys == 0 && !p.last_tile) return;       // every key of the tile lies after these tokens
  thread_local std::vector<const void*> rows;  // [3, keys]: k_nope rows, k_rope rows, v rows
  thread_local std::vector<float> scores;      // [G, keys]
  rows.resize(3 * static_cast<size_t>(keys));
  scores.resize(static_cast<size_t>(G) * keys);
  for (int32_t j = 0; j < keys; ++j) {
    rows[j] = p.k_nope + (static_cast<int64_t>(j) * H + h) * nope;
    rows[keys + j] = p.k_rope + j * p.k_rope_stride;
    rows[2 * keys + j] = p.v + (static_cast<int64_t>(j) * H + h) * vd;
  }
  const float* qa[kLatentGroup];
  const float* qb[kLatentGroup];
  float* out[kLatentGroup];
  float init[kLatentGroup], post[kLatentGroup];
  const int64_t t0 = s.token_offset + i0;
  for (int32_t g = 0; g < G; ++g) {
    qa[g] = p.q + ((t0 + g) * H + h) * qh;
    qb[g] = qa[g] + nope;
    out[g] = p.out + ((t0 + g) * H + h) * vd;
  }
  internal::LatentRows r{rows.data(), rows.data() + keys, keys, nope, R, false};
  internal::LatentScores(qa, qb, G, r, p.scale, scores.data(), keys);
  for (int32_t g = 0; g < G; ++g) {
    float* st = p.state + ((t0 + g) * H + h) * 2;
    float* sc = scores.data() + static_cast<size_t>(g) * keys;
    const int32_t n = std::clamp(s.start_pos + i0 + g - p.first_key + 1, 0, keys);  // keys at or before it
    const float m_old = p.first_tile ? -std::numeric_limits<float>::infinity() : st[0];
    const float m = std::max(m_old, internal::LatentMax(sc, n));
    const float sum = internal::LatentExpSum(sc, n, m);
    std::fill(sc + n, sc + keys, 0.f);
    init[g] = p.first_tile ? 0.f : internal::LatentExp(m_old - m);  // rescales what earlier tiles summed
    st[0] = m;
    st[1] = p.first_tile ? sum : st[1] * init[g] + sum;
    post[g] = 1.f / st[1];
  }
  r.a = rows.data() + 2 * static_cast<size_t>(keys);
  r.na = vd;
  r.nb = 0;
  internal::LatentValues(scores.data(), keys, G, r, out, p.first_tile ? nullptr : init, p.last_tile ? post : nullptr);
}

}  // namespace

void ExpandedLatentAttention(ThreadPool& pool, const ExpandedLatentAttentionParams& p) {
  const int32_t n = p.seq.num_tokens, H = p.num_heads;
  if (n <= 0 || H <= 0) return;
  // Items head-major, so that neighbouring items share a head's keys and values.
  const int32_t blocks = (n + kLatentGroup - 1) / kLatentGroup;
  const int64_t values_per_item = static_cast<int64_t>(p.num_keys) * (p.nope_dim + p.rope_dim + p.v_dim) * kLatentGroup;
  pool.ParallelForRanges(static_cast<int64_t>(blocks) * H, values_per_item, 8192, [&](int64_t a, int64_t b) {
    for (int64_t item = a; item < b; ++item) {
      const int32_t h = static_cast<int32_t>(item / blocks), i0 = static_cast<int32_t>(item % blocks) * kLatentGroup;
      AttendBlock(p, h, i0, std::min(kLatentGroup, n - i0));
    }
  });
}

}  // namespace ls::cpu
