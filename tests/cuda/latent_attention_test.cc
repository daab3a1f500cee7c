// The CUDA backend's latent attention (MLA, absorbed) equals the CPU backend's on a step mixing a
// prefill chunk after cached rows and decodes over long contexts with shuffled block tables: the
// cache afterwards holds the new rows and nothing else changed, and the outputs agree within 1e-5
// absolute plus 1e-5 relative. The CUDA backend's per-head GEMM (BF16 operands) equals the CPU
// backend's on BF16-rounded inputs within the GEMM tolerance. Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::AllClose;
using cuda_test::DeviceArray;

TEST(CudaLatentAttention, MatchesCpuOverLongContexts) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(31);
  const int32_t H = 6, L = 96, R = 16, W = L + R, block = 16, qstride = 40;
  struct Spec {
    int32_t start, tokens;
  };
  const std::vector<Spec> specs = {{0, 19}, {700, 3}, {1200, 1}, {33, 1}};
  int32_t blocks_needed = 0;
  for (const Spec& s : specs) blocks_needed += (s.start + s.tokens + block - 1) / block;
  std::vector<int32_t> pool(blocks_needed + 4);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<std::vector<int32_t>> tables;
  std::vector<AttentionSeq> seqs;
  int32_t next = 0, T = 0;
  for (const Spec& s : specs) {
    const int32_t n = (s.start + s.tokens + block - 1) / block;
    tables.emplace_back(pool.begin() + next, pool.begin() + next + n);
    next += n;
    seqs.push_back({T, s.tokens, s.start, nullptr, n});
    T += s.tokens;
  }
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i].block_table = tables[i].data();
  const int32_t num_blocks = static_cast<int32_t>(pool.size());
  const std::vector<float> q_lat = cuda_test::RandomFloats(static_cast<size_t>(T) * H * L, rng, 0.3f);
  const std::vector<float> q_rope = cuda_test::RandomFloats(static_cast<size_t>(T) * H * qstride, rng);
  const std::vector<float> c_new = cuda_test::RandomFloats(static_cast<size_t>(T) * L, rng);
  const std::vector<float> k_new = cuda_test::RandomFloats(static_cast<size_t>(T) * R, rng);
  std::vector<float> cache = cuda_test::RandomFloats(static_cast<size_t>(num_blocks) * block * W, rng);

  DeviceArray<float> dql(q_lat), dqr(q_rope), dc(c_new), dk(k_new), dcache(cache),
      dout(static_cast<size_t>(T) * H * L);
  dout.Poison();
  LatentAttentionParams p;
  p.q_latent = dql.get();
  p.q_rope = dqr.get();
  p.q_rope_stride = qstride;
  p.c_new = dc.get();
  p.k_rope_new = dk.get();
  p.out = dout.get();
  p.num_heads = H;
  p.latent_dim = L;
  p.rope_dim = R;
  p.scale = 0.11f;
  p.cache = KvLayer{dcache.get(), nullptr, num_blocks, block};
  p.seqs = seqs.data();
  p.num_seqs = static_cast<int32_t>(seqs.size());
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  gpu->PagedLatentAttention(p);  // the sequences and their block tables: host memory

  std::vector<float> out(static_cast<size_t>(T) * H * L);
  p.q_latent = q_lat.data();
  p.q_rope = q_rope.data();
  p.c_new = c_new.data();
  p.k_rope_new = k_new.data();
  p.out = out.data();
  p.cache = KvLayer{cache.data(), nullptr, num_blocks, block};
  CpuBackend cpu(2);
  cpu.PagedLatentAttention(p);
  EXPECT_TRUE(AllClose(dout.Download(), out, 1e-5, 1e-5));
  EXPECT_EQ(dcache.Download(), cache);
}

TEST(CudaHeadGemm, MatchesCpuOnBf16RoundedInputs) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  CpuBackend cpu(2);
  std::mt19937 rng(32);
  const int32_t H = 5, K = 48, N = 40, T = 7, x_head = 64;  // heads read [t, h, 0:48] of rows 64 apart
  std::vector<float> x = cuda_test::RandomFloats(static_cast<size_t>(T) * H * x_head, rng);
  for (float& e : x) e = Bf16ToF32(F32ToBf16(e));
  const std::vector<uint16_t> w = cuda_test::RandomBf16(static_cast<size_t>(H) * N * K, rng, 0.2f);
  std::vector<Tensor> host_w, dev_w;
  std::vector<std::unique_ptr<DeviceArray<uint16_t>>> dev_data;
  for (int32_t h = 0; h < H; ++h) {
    host_w.push_back(Tensor{w.data() + static_cast<size_t>(h) * N * K, DType::kBF16, N, K});
    dev_data.push_back(std::make_unique<DeviceArray<uint16_t>>(
        std::vector<uint16_t>(w.begin() + static_cast<size_t>(h) * N * K, w.begin() + static_cast<size_t>(h + 1) * N * K)));
    dev_w.push_back(Tensor{dev_data.back()->get(), DType::kBF16, N, K});
  }
  const RowStrides xs{H * x_head, x_head}, ys{H * N, N};
  std::vector<float> want(static_cast<size_t>(T) * H * N);
  cpu.HeadGemm(x.data(), xs, T, H, host_w.data(), want.data(), ys);
  DeviceArray<float> dx(x), dy(want.size());
  dy.Poison();
  gpu->HeadGemm(dx.get(), xs, T, H, dev_w.data(), dy.get(), ys);
  gpu->Synchronize();
  EXPECT_TRUE(AllClose(dy.Download(), want, 1e-4, 1e-3));
}

}  // namespace
}  // namespace ls
