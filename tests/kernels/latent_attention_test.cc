// MLA's absorbed form (what the CPU backend runs: the key up-projection folded into the query,
// latent attention over the cached rows, the value up-projection after) equals the expanded form
// (per-head keys [W_UK_h c | k_rope] and values W_UV_h c, ordinary attention), computed here in
// double precision, within float rounding: over contexts of 1,000+ positions spread over a
// scrambled block table, a prefill chunk after cached tokens and a decode, with a float32 and a
// BF16 cache (the reference then reads the cache's rounded rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/dtype.h"
#include "tests/kernels/normal_values.h"

namespace ls {
namespace {

using test::NormalValues;

struct Sizes {
  int32_t H = 12, L = 64, R = 16, nope = 24, v = 32, block = 16;  // heads: a group of 8 and one of 4
};

void CheckAbsorbedEqualsExpanded(DType cache_dtype) {
  const Sizes z;
  std::mt19937 rng(cache_dtype == DType::kF32 ? 21 : 22);
  const int32_t W = z.L + z.R, qh = z.nope + z.R;
  // Two sequences: 3 new tokens after 1,000 cached ones, and a decode at position 1,500.
  struct Seq {
    int32_t start, tokens;
  };
  const std::vector<Seq> specs = {{1000, 3}, {1500, 1}};
  int32_t blocks_needed = 0;
  for (const Seq& s : specs) blocks_needed += (s.start + s.tokens + z.block - 1) / z.block;
  std::vector<int32_t> pool(blocks_needed + 5);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  const int32_t num_blocks = static_cast<int32_t>(pool.size());

  // Per sequence: every position's latent row (c, k_rope), the cached ones written straight into
  // the cache, the new ones handed to the op.
  std::vector<std::vector<int32_t>> tables;
  std::vector<std::vector<float>> rows;  // [positions, W] per sequence, as the cache holds them
  const size_t elem = DTypeSize(cache_dtype);
  std::vector<unsigned char> cache(static_cast<size_t>(num_blocks) * z.block * W * elem, 0);
  int32_t next = 0;
  std::vector<AttentionSeq> seqs;
  std::vector<float> c_new, k_new;
  int32_t T = 0;
  for (const Seq& s : specs) {
    const int32_t n = (s.start + s.tokens + z.block - 1) / z.block;
    tables.emplace_back(pool.begin() + next, pool.begin() + next + n);
    next += n;
    std::vector<float> r = NormalValues(static_cast<size_t>(s.start + s.tokens) * W, rng);
    if (cache_dtype == DType::kBF16)
      for (float& e : r) e = Bf16ToF32(F32ToBf16(e));
    for (int32_t pos = 0; pos < s.start; ++pos) {
      const int64_t off = (static_cast<int64_t>(tables.back()[pos / z.block]) * z.block + pos % z.block) * W;
      for (int32_t j = 0; j < W; ++j) {
        const float e = r[static_cast<size_t>(pos) * W + j];
        if (cache_dtype == DType::kBF16) {
          const uint16_t b = F32ToBf16(e);
          std::memcpy(cache.data() + (off + j) * elem, &b, 2);
        } else {
          std::memcpy(cache.data() + (off + j) * elem, &e, 4);
        }
      }
    }
    for (int32_t i = 0; i < s.tokens; ++i) {
      const float* row = r.data() + static_cast<size_t>(s.start + i) * W;
      c_new.insert(c_new.end(), row, row + z.L);
      k_new.insert(k_new.end(), row + z.L, row + W);
    }
    seqs.push_back({T, s.tokens, s.start, nullptr, n});
    T += s.tokens;
    rows.push_back(std::move(r));
  }
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i].block_table = tables[i].data();

  const std::vector<float> q = NormalValues(static_cast<size_t>(T) * z.H * qh, rng);
  const std::vector<float> w_uk = NormalValues(static_cast<size_t>(z.H) * z.nope * z.L, rng, 0.2f);  // [H][nope, L]
  const std::vector<float> w_uv = NormalValues(static_cast<size_t>(z.H) * z.v * z.L, rng, 0.2f);     // [H][v, L]
  std::vector<float> w_uk_t(w_uk.size());                                                       // [H][L, nope]
  for (int32_t h = 0; h < z.H; ++h)
    for (int32_t i = 0; i < z.nope; ++i)
      for (int32_t j = 0; j < z.L; ++j)
        w_uk_t[(static_cast<size_t>(h) * z.L + j) * z.nope + i] = w_uk[(static_cast<size_t>(h) * z.nope + i) * z.L + j];
  std::vector<Tensor> uk_t, uv;
  for (int32_t h = 0; h < z.H; ++h) {
    uk_t.push_back(Tensor{w_uk_t.data() + static_cast<size_t>(h) * z.L * z.nope, DType::kF32, z.L, z.nope});
    uv.push_back(Tensor{w_uv.data() + static_cast<size_t>(h) * z.v * z.L, DType::kF32, z.v, z.L});
  }
  const float scale = 1.f / std::sqrt(static_cast<float>(qh));

  // Absorbed, through the backend.
  CpuBackend be(2);
  std::vector<float> q_lat(static_cast<size_t>(T) * z.H * z.L), o_lat(q_lat.size()),
      got(static_cast<size_t>(T) * z.H * z.v);
  be.HeadGemm(q.data(), RowStrides{z.H * qh, qh}, T, z.H, uk_t.data(), q_lat.data(), RowStrides{z.H * z.L, z.L});
  LatentAttentionParams p;
  p.q_latent = q_lat.data();
  p.q_rope = q.data() + z.nope;
  p.q_rope_stride = qh;
  p.c_new = c_new.data();
  p.k_rope_new = k_new.data();
  p.out = o_lat.data();
  p.num_heads = z.H;
  p.latent_dim = z.L;
  p.rope_dim = z.R;
  p.scale = scale;
  p.cache = KvLayer{cache.data(), nullptr, num_blocks, z.block, cache_dtype};
  p.seqs = seqs.data();
  p.num_seqs = static_cast<int32_t>(seqs.size());
  be.PagedLatentAttention(p);
  be.HeadGemm(o_lat.data(), RowStrides{z.H * z.L, z.L}, T, z.H, uv.data(), got.data(), RowStrides{z.H * z.v, z.v});

  // Expanded, in double.
  double worst = 0;
  for (size_t si = 0; si < specs.size(); ++si) {
    for (int32_t i = 0; i < specs[si].tokens; ++i) {
      const int32_t t = seqs[si].token_offset + i, ctx = specs[si].start + i + 1;
      for (int32_t h = 0; h < z.H; ++h) {
        const float* qt = q.data() + (static_cast<size_t>(t) * z.H + h) * qh;
        std::vector<double> score(ctx);
        for (int32_t pos = 0; pos < ctx; ++pos) {
          const float* r = rows[si].data() + static_cast<size_t>(pos) * W;
          double s = 0;
          for (int32_t a = 0; a < z.nope; ++a) {  // q_nope · (W_UK_h c)
            double k = 0;
            for (int32_t j = 0; j < z.L; ++j) k += double(w_uk[(static_cast<size_t>(h) * z.nope + a) * z.L + j]) * r[j];
            s += qt[a] * k;
          }
          for (int32_t a = 0; a < z.R; ++a) s += double(qt[z.nope + a]) * r[z.L + a];
          score[pos] = s * scale;
        }
        const double mx = *std::max_element(score.begin(), score.end());
        double sum = 0;
        for (double& s : score) sum += (s = std::exp(s - mx));
        double diff = 0, norm = 0;  // this head's output row: relative L2 error
        for (int32_t a = 0; a < z.v; ++a) {
          double out = 0;
          for (int32_t pos = 0; pos < ctx; ++pos) {
            const float* r = rows[si].data() + static_cast<size_t>(pos) * W;
            double val = 0;
            for (int32_t j = 0; j < z.L; ++j) val += double(w_uv[(static_cast<size_t>(h) * z.v + a) * z.L + j]) * r[j];
            out += score[pos] / sum * val;
          }
          const double g = got[(static_cast<size_t>(t) * z.H + h) * z.v + a];
          diff += (g - out) * (g - out);
          norm += out * out;
        }
        worst = std::max(worst, std::sqrt(diff / norm));
      }
    }
  }
  EXPECT_LT(worst, 1e-5) << "cache " << DTypeName(cache_dtype);
  std::printf("absorbed vs expanded, %s cache: worst head row relative error %.3g\n",
              std::string(DTypeName(cache_dtype)).c_str(), worst);
}

TEST(LatentAttention, AbsorbedEqualsExpandedOverLongContextsFloat32Cache) {
  CheckAbsorbedEqualsExpanded(DType::kF32);
}

TEST(LatentAttention, AbsorbedEqualsExpandedOverLongContextsBf16Cache) {
  CheckAbsorbedEqualsExpanded(DType::kBF16);
}

}  // namespace
}  // namespace ls
