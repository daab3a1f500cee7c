// The CUDA backend's paged attention equals the CPU backend's on a step mixing a prefill, a
// prefill chunk after cached tokens and decodes, with shuffled block tables over a cache full of
// random values: the cache afterwards is identical (the new K/V in their slots, nothing else
// touched) and the outputs agree within 1e-5 absolute plus 1e-5 relative (outputs are averages of
// values of order 1). GQA, MQA and one KV head per query head; head sizes that are not multiples
// of 32; contexts over many softmax tiles; steps of few tokens over long contexts, which the
// backend divides among blocks (split-K over positions); sliding windows. Reports SKIPPED without
// a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::AllClose;
using cuda_test::DeviceArray;

struct SeqSpec {
  int32_t start_pos, num_tokens;
};

void CheckAgainstCpu(int32_t H, int32_t Hkv, int32_t hd, int32_t block_size, const std::vector<SeqSpec>& specs,
                     uint32_t seed, int32_t sliding_window = 0) {
  std::mt19937 rng(seed);
  // Block tables: every sequence gets distinct blocks, drawn from a shuffled pool.
  int32_t blocks_needed = 0;
  for (const SeqSpec& s : specs) blocks_needed += (s.start_pos + s.num_tokens + block_size - 1) / block_size;
  const int32_t num_blocks = blocks_needed + 3;
  std::vector<int32_t> pool_blocks(num_blocks);
  std::iota(pool_blocks.begin(), pool_blocks.end(), 0);
  std::shuffle(pool_blocks.begin(), pool_blocks.end(), rng);
  std::vector<std::vector<int32_t>> tables;
  std::vector<AttentionSeq> seqs;
  int32_t next_block = 0, offset = 0;
  for (const SeqSpec& s : specs) {
    const int32_t n = (s.start_pos + s.num_tokens + block_size - 1) / block_size;
    tables.emplace_back(pool_blocks.begin() + next_block, pool_blocks.begin() + next_block + n);
    next_block += n;
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    seqs.push_back(
        {offset, specs[i].num_tokens, specs[i].start_pos, tables[i].data(), static_cast<int32_t>(tables[i].size())});
    offset += specs[i].num_tokens;
  }
  const int64_t T = offset, kv_width = static_cast<int64_t>(Hkv) * hd;
  const int64_t cache_size = static_cast<int64_t>(num_blocks) * block_size * kv_width;
  const std::vector<float> q = cuda_test::RandomFloats(T * H * hd, rng);
  const std::vector<float> k_new = cuda_test::RandomFloats(T * kv_width, rng);
  const std::vector<float> v_new = cuda_test::RandomFloats(T * kv_width, rng);
  std::vector<float> k_cache = cuda_test::RandomFloats(cache_size, rng);
  std::vector<float> v_cache = cuda_test::RandomFloats(cache_size, rng);

  DeviceArray<float> dq(q), dk(k_new), dv(v_new), dkc(k_cache), dvc(v_cache), dout(T * H * hd);
  dout.Poison();
  AttentionParams p;
  p.q = dq.get();
  p.k_new = dk.get();
  p.v_new = dv.get();
  p.out = dout.get();
  p.num_heads = H;
  p.num_kv_heads = Hkv;
  p.head_dim = hd;
  p.scale = 1.f / std::sqrt(static_cast<float>(hd));
  p.sliding_window = sliding_window;
  p.cache = KvLayer{dkc.get(), dvc.get(), num_blocks, block_size};
  p.seqs = seqs.data();
  p.num_seqs = static_cast<int32_t>(seqs.size());
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  gpu->PagedAttention(p);  // the sequences and their block tables: host memory

  std::vector<float> out(T * H * hd);
  p.q = q.data();
  p.k_new = k_new.data();
  p.v_new = v_new.data();
  p.out = out.data();
  p.cache = KvLayer{k_cache.data(), v_cache.data(), num_blocks, block_size};
  CpuBackend cpu(2);
  cpu.PagedAttention(p);

  EXPECT_TRUE(AllClose(dout.Download(), out, 1e-5, 1e-5)) << "H " << H << " Hkv " << Hkv << " hd " << hd;
  EXPECT_EQ(dkc.Download(), k_cache);
  EXPECT_EQ(dvc.Download(), v_cache);
}

TEST(CudaPagedAttention, MatchesCpuForMixedPrefillAndDecodeWithGqa) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  CheckAgainstCpu(8, 2, 40, 5, {{0, 23}, {13, 9}, {40, 1}, {7, 1}}, 15);
}

TEST(CudaPagedAttention, MatchesCpuForMultiQueryAttention) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  CheckAgainstCpu(6, 1, 64, 16, {{0, 17}, {100, 1}, {31, 2}}, 16);
}

TEST(CudaPagedAttention, MatchesCpuForLongContextsWithOneKvHeadPerQueryHead) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  CheckAgainstCpu(4, 4, 128, 16, {{300, 1}, {0, 70}, {517, 3}}, 17);
}

TEST(CudaPagedAttention, MatchesCpuForFewDecodesOverLongContexts) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  // Six blocks for the device's multiprocessors: each context splits into ranges of about 64
  // positions, up to 24 of them; the shortest fits in one.
  CheckAgainstCpu(8, 2, 64, 16, {{1500, 1}, {700, 1}, {33, 1}}, 19);
  CheckAgainstCpu(12, 3, 24, 7, {{999, 1}, {64, 1}}, 20);
}

TEST(CudaPagedAttention, MatchesCpuForALargeQueryGroup) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  // 64 query heads on one KV head of 128: over 48 KiB of shared memory per block.
  CheckAgainstCpu(64, 1, 128, 16, {{0, 5}, {60, 1}}, 18);
}

TEST(CudaPagedAttention, MatchesCpuWithASlidingWindow) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  // Prefill and decodes longer and shorter than the window; split contexts whose first splits lie
  // wholly before the window.
  CheckAgainstCpu(8, 2, 64, 16, {{0, 40}, {300, 1}, {5, 1}}, 21, 37);
  CheckAgainstCpu(8, 2, 64, 16, {{1500, 1}, {700, 1}}, 22, 200);
  CheckAgainstCpu(64, 1, 128, 16, {{0, 5}, {90, 1}}, 23, 33);  // the tiled kernel
}

}  // namespace
}  // namespace ls
