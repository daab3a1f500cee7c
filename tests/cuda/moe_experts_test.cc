// The CUDA routed experts (CudaBackend::MoeExperts: permute, grouped GEMMs on the tensor cores,
// combine) against the CPU op on the same BF16 weights: relative norm error ≤ 1e-2 (inputs and
// GLU outputs are rounded to BF16 on the device only), per-expert token counts added exactly.
// Shapes cover decode, groups over several 64-row tiles, experts nobody routes to, widths that
// are not multiples of the 64-wide tiles, and rows that are not 16-byte aligned. The device table
// of expert pointers follows an array whose contents change; counts of many calls queued together
// arrive at the next synchronization. Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::RelNormError;

struct MoeShape {
  int64_t T, din, f, dout;
  int32_t K, N;
  int32_t routed_experts;  // tokens choose among experts 0 .. routed_experts - 1 only
  Activation act;
};

// Host and device copies of one expert array's BF16 weights.
struct Experts {
  std::vector<std::vector<uint16_t>> host;  // [3N]: gate, up, down per expert
  std::vector<Tensor> gate, up, down;       // host views (CPU op)
  std::vector<Tensor> dgate, dup, ddown;    // device views (CUDA op)
  std::vector<void*> device_memory;
};

void MakeExperts(const MoeShape& s, std::mt19937& rng, CudaBackend& gpu, Experts* x) {
  for (int32_t e = 0; e < s.N; ++e) {
    x->host.push_back(cuda_test::RandomBf16(s.f * s.din, rng, 0.2f));
    x->host.push_back(cuda_test::RandomBf16(s.f * s.din, rng, 0.2f));
    x->host.push_back(cuda_test::RandomBf16(s.dout * s.f, rng, 0.2f));
  }
  for (int32_t e = 0; e < s.N; ++e) {
    const Tensor g{x->host[3 * e].data(), DType::kBF16, s.f, s.din};
    const Tensor u{x->host[3 * e + 1].data(), DType::kBF16, s.f, s.din};
    const Tensor d{x->host[3 * e + 2].data(), DType::kBF16, s.dout, s.f};
    x->gate.push_back(g);
    x->up.push_back(u);
    x->down.push_back(d);
    for (auto [t, out] : {std::pair{&g, &x->dgate}, std::pair{&u, &x->dup}, std::pair{&d, &x->ddown}}) {
      void* mem = gpu.Allocate(gpu.PreparedWeightBytes(*t, WeightUse::kMatmul));
      x->device_memory.push_back(mem);
      out->push_back(gpu.PrepareWeight(*t, WeightUse::kMatmul, mem));
    }
  }
}

void FreeExperts(CudaBackend& gpu, Experts& x) {
  for (void* p : x.device_memory) gpu.Free(p);
}

// Distinct experts per token among the first routed_experts.
std::vector<int32_t> RandomRouting(const MoeShape& s, std::mt19937& rng) {
  std::vector<int32_t> ids(s.T * s.K), choice(s.routed_experts);
  for (int64_t t = 0; t < s.T; ++t) {
    std::iota(choice.begin(), choice.end(), 0);
    std::shuffle(choice.begin(), choice.end(), rng);
    std::copy_n(choice.begin(), s.K, ids.begin() + t * s.K);
  }
  return ids;
}

struct MoeRun {
  std::vector<float> out;
  std::vector<int64_t> counts;
};

// The op's parameters for a shape, on the given (host or device) arrays; the expert arrays hold
// one Tensor per expert. Counts go to a host array either way.
MoeParams Params(const MoeShape& s, const float* z, const int32_t* ids, const float* w, const Tensor* gate,
                 const Tensor* up, const Tensor* down, float* out, int64_t* counts) {
  MoeParams p;
  p.z = z;
  p.num_tokens = s.T;
  p.in_width = s.din;
  p.out_width = s.dout;
  p.topk_ids = ids;
  p.topk_weights = w;
  p.top_k = s.K;
  p.num_experts = s.N;
  p.gate = gate;
  p.up = up;
  p.down = down;
  p.act = s.act;
  p.out = out;
  p.tokens_per_expert = counts;
  return p;
}

MoeRun RunCpu(const MoeShape& s, const std::vector<float>& z, const std::vector<int32_t>& ids,
              const std::vector<float>& w, const Experts& x) {
  MoeRun r{std::vector<float>(s.T * s.dout), std::vector<int64_t>(s.N, 5)};
  CpuBackend cpu(2);
  cpu.MoeExperts(Params(s, z.data(), ids.data(), w.data(), x.gate.data(), x.up.data(), x.down.data(), r.out.data(),
                        r.counts.data()));
  return r;
}

MoeRun RunCuda(CudaBackend& gpu, const MoeShape& s, const std::vector<float>& z, const std::vector<int32_t>& ids,
               const std::vector<float>& w, const Experts& x) {
  cuda_test::DeviceArray<float> dz(z), dw(w), dout(s.T * s.dout);
  cuda_test::DeviceArray<int32_t> dids(ids);
  dout.Poison();
  MoeRun r{std::vector<float>(), std::vector<int64_t>(s.N, 5)};
  gpu.MoeExperts(Params(s, dz.get(), dids.get(), dw.get(), x.dgate.data(), x.dup.data(), x.ddown.data(), dout.get(),
                        r.counts.data()));
  gpu.Synchronize();
  r.out = dout.Download();
  return r;
}

TEST(CudaMoeExperts, MatchesCpuOnTheSameBf16Weights) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  const MoeShape shapes[] = {
      {37, 72, 70, 72, 3, 11, 9, Activation::kSiTU},        // two experts never routed to
      {5, 36, 130, 20, 2, 6, 6, Activation::kSiLU},         // rows of 72 bytes: not 16-byte aligned
      {1, 256, 128, 256, 8, 64, 64, Activation::kSiTU},     // decode
      {300, 64, 96, 64, 2, 4, 4, Activation::kSiTU},        // ~150 rows per expert: several row tiles
      {64, 200, 1024, 136, 16, 96, 96, Activation::kSiLU},  // many experts, wide f
  };
  std::mt19937 rng(19);
  for (const MoeShape& s : shapes) {
    Experts x;
    MakeExperts(s, rng, *gpu, &x);
    const std::vector<float> z = cuda_test::RandomFloats(s.T * s.din, rng);
    const std::vector<float> w = cuda_test::RandomFloats(s.T * s.K, rng, 0.5f);
    const std::vector<int32_t> ids = RandomRouting(s, rng);
    const MoeRun want = RunCpu(s, z, ids, w, x), got = RunCuda(*gpu, s, z, ids, w, x);
    EXPECT_LE(RelNormError(got.out, want.out), 1e-2) << "T " << s.T << " N " << s.N << " f " << s.f;
    EXPECT_EQ(got.counts, want.counts) << "T " << s.T << " N " << s.N;
    FreeExperts(*gpu, x);
  }
}

TEST(CudaMoeExperts, FollowsAnExpertArrayWhoseContentsChange) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  const MoeShape s{9, 64, 64, 64, 2, 5, 5, Activation::kSiTU};
  std::mt19937 rng(20);
  Experts a, b;
  MakeExperts(s, rng, *gpu, &a);
  MakeExperts(s, rng, *gpu, &b);
  const std::vector<float> z = cuda_test::RandomFloats(s.T * s.din, rng);
  const std::vector<float> w = cuda_test::RandomFloats(s.T * s.K, rng, 0.5f);
  const std::vector<int32_t> ids = RandomRouting(s, rng);
  // The same host arrays hold a's device views, then b's: the second run must use b's weights.
  Experts views = a;
  const MoeRun first = RunCuda(*gpu, s, z, ids, w, views);
  std::copy(b.dgate.begin(), b.dgate.end(), views.dgate.begin());  // same array addresses, other pointers
  std::copy(b.dup.begin(), b.dup.end(), views.dup.begin());
  std::copy(b.ddown.begin(), b.ddown.end(), views.ddown.begin());
  const MoeRun second = RunCuda(*gpu, s, z, ids, w, views);
  EXPECT_LE(RelNormError(first.out, RunCpu(s, z, ids, w, a).out), 1e-2);
  EXPECT_LE(RelNormError(second.out, RunCpu(s, z, ids, w, b).out), 1e-2);
  FreeExperts(*gpu, a);
  FreeExperts(*gpu, b);
}

// Expert counts come back without a wait: many MoE calls (more than the backend keeps pending)
// before one Synchronize all add into their host counters, each call's own counts.
TEST(CudaMoeExperts, CountsOfCallsQueuedTogetherArriveAtSynchronize) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  const MoeShape s{6, 64, 64, 64, 2, 5, 5, Activation::kSiTU};
  std::mt19937 rng(21);
  Experts x;
  MakeExperts(s, rng, *gpu, &x);
  const std::vector<float> z = cuda_test::RandomFloats(s.T * s.din, rng);
  const std::vector<float> w = cuda_test::RandomFloats(s.T * s.K, rng, 0.5f);
  cuda_test::DeviceArray<float> dz(z), dw(w), dout(s.T * s.dout);
  constexpr int kCalls = 300, kLayers = 3;
  std::vector<std::vector<int64_t>> got(kLayers, std::vector<int64_t>(s.N, 0)), want = got;
  std::vector<std::unique_ptr<cuda_test::DeviceArray<int32_t>>> ids;  // alive until the calls ran
  for (int c = 0; c < kCalls; ++c) {
    const std::vector<int32_t> routing = RandomRouting(s, rng);
    for (int32_t id : routing) ++want[c % kLayers][id];
    ids.push_back(std::make_unique<cuda_test::DeviceArray<int32_t>>(routing));
    gpu->MoeExperts(Params(s, dz.get(), ids.back()->get(), dw.get(), x.dgate.data(), x.dup.data(), x.ddown.data(),
                           dout.get(), got[c % kLayers].data()));
  }
  gpu->Synchronize();
  EXPECT_EQ(got, want);
  FreeExperts(*gpu, x);
}

}  // namespace
}  // namespace ls
