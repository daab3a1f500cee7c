// CPU paged attention: matches a double-precision softmax reference over a scrambled block table
// for head widths taken by the AVX-512 step and for widths left to the portable step.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/attention_core.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/gemm.h"

namespace ls::cpu {
namespace {

struct Case {
  int32_t H, Hkv, hd, ctx;
};

class PagedAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(PagedAttentionTest, DecodeTokenMatchesDoubleReference) {
  const Case c = GetParam();
  const int32_t block = 4, blocks = (c.ctx + block - 1) / block + 2;
  std::mt19937 rng(c.hd * 7 + c.ctx);
  std::normal_distribution<float> nd;
  const int64_t kvw = int64_t{c.Hkv} * c.hd;
  std::vector<float> kc(int64_t{blocks} * block * kvw), vc(kc.size());
  for (auto& v : kc) v = nd(rng);
  for (auto& v : vc) v = nd(rng);
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<float> q(int64_t{c.H} * c.hd), kn(kvw), vn(kvw), out(q.size(), -99.f);
  for (auto* v : {&q, &kn, &vn})
    for (auto& x : *v) x = nd(rng);
  AttentionSeq s{0, 1, c.ctx - 1, table.data(), blocks};
  AttentionParams p;
  p.q = q.data();
  p.k_new = kn.data();
  p.v_new = vn.data();
  p.out = out.data();
  p.num_heads = c.H;
  p.num_kv_heads = c.Hkv;
  p.head_dim = c.hd;
  p.scale = 1.f / std::sqrt(static_cast<float>(c.hd));
  p.cache = {kc.data(), vc.data(), blocks, block};
  p.seqs = &s;
  p.num_seqs = 1;
  ThreadPool pool(2);
  PagedAttention(pool, p);
  auto slot = [&](int32_t pos, int32_t kvh) {
    return (int64_t{table[pos / block]} * block + pos % block) * kvw + int64_t{kvh} * c.hd;
  };
  for (int32_t h = 0; h < c.H; ++h) {
    const int32_t kvh = h / (c.H / c.Hkv);
    std::vector<double> sc(c.ctx);
    double mx = -1e300, sum = 0;
    for (int32_t pos = 0; pos < c.ctx; ++pos) {
      double d = 0;
      for (int32_t j = 0; j < c.hd; ++j) d += double{q[h * c.hd + j]} * kc[slot(pos, kvh) + j];
      mx = std::max(mx, sc[pos] = d * p.scale);
    }
    for (auto& v : sc) sum += (v = std::exp(v - mx));
    for (int32_t j = 0; j < c.hd; ++j) {
      double ref = 0;
      for (int32_t pos = 0; pos < c.ctx; ++pos) ref += sc[pos] / sum * vc[slot(pos, kvh) + j];
      ASSERT_NEAR(out[h * c.hd + j], ref, 2e-5 * (1 + std::fabs(ref))) << "head " << h << " dim " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionTest,
                         ::testing::Values(Case{4, 2, 64, 1}, Case{4, 2, 64, 37}, Case{8, 2, 128, 100},
                                           Case{2, 2, 16, 17}, Case{6, 3, 48, 33}, Case{4, 1, 256, 20},
                                           Case{2, 1, 40, 9} /* not a multiple of 16: portable */,
                                           Case{2, 1, 160, 9} /* 160: portable */));

// The shapes above reach both steps only if the AVX-512 step takes exactly the widths it claims.
TEST(AttendAvx512, TakesMultiplesOf16UpTo128And256) {
  if (!internal::CpuHasAvx512()) GTEST_SKIP() << "CPU has no AVX-512";
  internal::AttendArgs a;
  for (int32_t hd : {16, 32, 48, 64, 96, 112, 128, 256}) {
    a.head_dim = hd;
    a.ctx = 0;
    a.group = 0;
    EXPECT_TRUE(internal::AttendAvx512(a)) << hd;
  }
  for (int32_t hd : {8, 40, 144, 160, 272}) {
    a.head_dim = hd;
    EXPECT_FALSE(internal::AttendAvx512(a)) << hd;
  }
}

}  // namespace
}  // namespace ls::cpu
