// The CUDA backend's ops of MLA's expanded form equal the CPU backend's: StoreLatentRows and
// LoadLatentRows (sequences flattened and block tables uploaded) move exactly the CPU backend's
// rows, and ExpandedLatentAttention over a context in three tiles (online softmax across calls)
// agrees within 1e-5 absolute plus 1e-5 relative, state included.
// Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <algorithm>
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

TEST(CudaLatentRows, StoreAndLoadMatchTheCpuBackend) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  CpuBackend cpu(2);
  std::mt19937 rng(51);
  const int32_t L = 72, R = 16, W = L + R, block = 16, blocks = 40;
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  // Each sequence's table covers its rows after the store: 337 rows in 22 blocks, 251 in 16.
  const std::vector<AttentionSeq> seqs = {{0, 37, 300, table.data(), 22}, {37, 1, 250, table.data() + 22, 16}};
  const int32_t T = 38;
  const std::vector<float> c = cuda_test::RandomFloats(static_cast<size_t>(T) * L, rng);
  const std::vector<float> k = cuda_test::RandomFloats(static_cast<size_t>(T) * R, rng);
  std::vector<float> cache = cuda_test::RandomFloats(static_cast<size_t>(blocks) * block * W, rng);
  DeviceArray<float> dc(c), dk(k), dcache(cache);
  LatentAttentionParams p;
  p.latent_dim = L;
  p.rope_dim = R;
  p.seqs = seqs.data();
  p.num_seqs = 2;
  p.c_new = dc.get();
  p.k_rope_new = dk.get();
  p.cache = KvLayer{dcache.get(), nullptr, blocks, block};
  gpu->StoreLatentRows(p);
  p.c_new = c.data();
  p.k_rope_new = k.data();
  p.cache = KvLayer{cache.data(), nullptr, blocks, block};
  cpu.StoreLatentRows(p);
  EXPECT_EQ(dcache.Download(), cache);
  // Rows 10 .. 329 of the first sequence: across blocks, old rows and new.
  const int32_t first = 10, count = 320;
  std::vector<float> want(static_cast<size_t>(count) * W);
  cpu.LoadLatentRows(p.cache, W, seqs[0], first, count, want.data());
  DeviceArray<float> dout(want.size());
  dout.Poison();
  gpu->LoadLatentRows(KvLayer{dcache.get(), nullptr, blocks, block}, W, seqs[0], first, count, dout.get());
  EXPECT_EQ(dout.Download(), want);
}

TEST(CudaExpandedLatentAttention, MatchesCpuAcrossTiles) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(52);
  const int32_t H = 6, nope = 48, R = 16, v = 40, qh = nope + R, rope_stride = 24;
  const int32_t start = 600, n = 45, context = start + n, tile = 256, T = n + 3;  // the sequence's rows from 3
  const std::vector<float> q = cuda_test::RandomFloats(static_cast<size_t>(T) * H * qh, rng, 0.4f);
  const std::vector<float> k_nope = cuda_test::RandomFloats(static_cast<size_t>(context) * H * nope, rng);
  const std::vector<float> k_rope = cuda_test::RandomFloats(static_cast<size_t>(context) * rope_stride, rng);
  const std::vector<float> values = cuda_test::RandomFloats(static_cast<size_t>(context) * H * v, rng);
  DeviceArray<float> dq(q), dkn(k_nope), dkr(k_rope), dv(values), dout(static_cast<size_t>(T) * H * v),
      dstate(static_cast<size_t>(T) * H * 2);
  std::vector<float> out(dout.size(), 0.f), state(dstate.size(), 0.f);
  dout.Upload(out);
  dstate.Upload(state);
  ExpandedLatentAttentionParams p;
  p.num_heads = H;
  p.nope_dim = nope;
  p.rope_dim = R;
  p.v_dim = v;
  p.scale = 0.13f;
  p.k_rope_stride = rope_stride;
  p.seq = AttentionSeq{3, n, start, nullptr, 0};
  CpuBackend cpu(2);
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  for (int32_t first = 0; first < context; first += tile) {
    p.first_key = first;
    p.num_keys = std::min(tile, context - first);
    p.first_tile = first == 0;
    p.last_tile = first + p.num_keys == context;
    p.q = dq.get();
    p.k_nope = dkn.get() + static_cast<size_t>(first) * H * nope;
    p.k_rope = dkr.get() + static_cast<size_t>(first) * rope_stride;
    p.v = dv.get() + static_cast<size_t>(first) * H * v;
    p.out = dout.get();
    p.state = dstate.get();
    gpu->ExpandedLatentAttention(p);
    p.q = q.data();
    p.k_nope = k_nope.data() + static_cast<size_t>(first) * H * nope;
    p.k_rope = k_rope.data() + static_cast<size_t>(first) * rope_stride;
    p.v = values.data() + static_cast<size_t>(first) * H * v;
    p.out = out.data();
    p.state = state.data();
    cpu.ExpandedLatentAttention(p);
  }
  EXPECT_TRUE(AllClose(dout.Download(), out, 1e-5, 1e-5));
  EXPECT_TRUE(AllClose(dstate.Download(), state, 1e-5, 1e-5));
}

}  // namespace
}  // namespace ls
