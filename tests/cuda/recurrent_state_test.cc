// The CUDA backend's recurrent-layer ops equal the CPU backend's: the short convolution over
// several sequences (fresh ones and ones continuing from their slot's inputs), outputs and slots
// alike, and Kimi Delta Attention's recurrence (both forget gates) with outputs within 1e-5 and the
// slots' states after the step. Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::AllClose;
using cuda_test::DeviceArray;

// Three sequences: a fresh prefill, a continuation of 5 tokens, a decode; slots 2, 0 and 1.
std::vector<AttentionSeq> Seqs() { return {{0, 9, 0, nullptr, 0, 2}, {9, 5, 30, nullptr, 0, 0}, {14, 1, 77, nullptr, 0, 1}}; }
constexpr int32_t kTokens = 15, kSlots = 3;

TEST(CudaShortConv, MatchesCpuOutputsAndSlots) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(61);
  const int64_t C = 200, K = 4, state_floats = 3 * (K - 1) * C + 17;
  const std::vector<float> in = cuda_test::RandomFloats(kTokens * C, rng);
  const std::vector<float> w = cuda_test::RandomFloats(C * K, rng);
  std::vector<float> state = cuda_test::RandomFloats(kSlots * state_floats, rng);
  const std::vector<AttentionSeq> seqs = Seqs();
  DeviceArray<float> din(in), dw(w), dstate(state), dout(kTokens * C);
  const Tensor dweight{dw.get(), DType::kF32, C, K}, hweight{w.data(), DType::kF32, C, K};
  ShortConvParams p;
  p.in = din.get();
  p.out = dout.get();
  p.channels = C;
  p.weight = &dweight;
  p.kernel = K;
  p.cache.state = dstate.get();
  p.cache.state_floats = state_floats;
  p.tail_offset = (K - 1) * C + 5;
  p.seqs = seqs.data();
  p.num_seqs = 3;
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  gpu->ShortConv(p);  // the sequences: host memory

  std::vector<float> out(kTokens * C);
  p.in = in.data();
  p.out = out.data();
  p.weight = &hweight;
  p.cache.state = state.data();
  CpuBackend cpu(2);
  cpu.ShortConv(p);
  EXPECT_TRUE(AllClose(dout.Download(), out, 1e-6, 1e-5));
  EXPECT_TRUE(AllClose(dstate.Download(), state, 0, 0));
}

TEST(CudaKdaAttention, MatchesCpuRecurrence) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(62);
  const int32_t H = 3, d = 32;
  const int64_t width = H * d, state_floats = width * d + 11;
  const std::vector<AttentionSeq> seqs = Seqs();
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  for (KdaGate gate : {KdaGate::kSoftplus, KdaGate::kBoundedSigmoid}) {
    const std::vector<float> q = cuda_test::RandomFloats(kTokens * width, rng), k = cuda_test::RandomFloats(kTokens * width, rng),
                             v = cuda_test::RandomFloats(kTokens * width, rng), g = cuda_test::RandomFloats(kTokens * width, rng),
                             beta = cuda_test::RandomFloats(kTokens * H, rng), a_log = cuda_test::RandomFloats(H + 2, rng, 0.3f),
                             dt = cuda_test::RandomFloats(width, rng, 0.3f);
    std::vector<float> state = cuda_test::RandomFloats(kSlots * state_floats, rng, 0.1f);
    DeviceArray<float> dq(q), dk(k), dv(v), dg(g), db(beta), da(a_log), ddt(dt), dstate(state), dout(kTokens * width);
    KdaParams p;
    p.q = dq.get();
    p.k = dk.get();
    p.v = dv.get();
    p.graw = dg.get();
    p.beta = db.get();
    p.out = dout.get();
    p.num_heads = H;
    p.head_dim = d;
    p.a_log = Tensor{da.get(), DType::kF32, 1, H};
    p.dt_bias = Tensor{ddt.get(), DType::kF32, 1, width};
    p.gate = gate;
    p.lower_bound = -5.f;
    p.cache.state = dstate.get();
    p.cache.state_floats = state_floats;
    p.seqs = seqs.data();
    p.num_seqs = 3;
    p.chunk = 0;
    gpu->KdaAttention(p);  // the sequences: host memory

    std::vector<float> out(kTokens * width);
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.graw = g.data();
    p.beta = beta.data();
    p.out = out.data();
    p.a_log = Tensor{a_log.data(), DType::kF32, 1, H};
    p.dt_bias = Tensor{dt.data(), DType::kF32, 1, width};
    p.cache.state = state.data();
    CpuBackend cpu(2);
    cpu.KdaAttention(p);
    EXPECT_TRUE(AllClose(dout.Download(), out, 1e-5, 1e-4));
    EXPECT_TRUE(AllClose(dstate.Download(), state, 1e-5, 1e-4));
  }
}

}  // namespace
}  // namespace ls
