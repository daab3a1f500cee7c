// CudaBackend against CpuBackend through the Backend interface alone: weight preparation, copies,
// and one small random Stable LatentMoE decoder layer (embedding, attention over the paged cache
// with qk-norm and RoPE, router, latent MoE with its norm, shared expert, combine and add) run op
// by op on both. Final hidden states and KV cache agree within a relative norm error of 1e-2
// (BF16 GEMM operands on the device); routing agrees except near ties (keys within 2e-2), and the
// CPU's routing is handed to both MoE ops so that one near tie cannot hide the rest; expert token
// counts are equal. Reports SKIPPED without a device.
#include "kernels/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/quantized_weight.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::RelNormError;

TEST(CudaBackend, ReportsADeviceThatDoesNotExist) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::string error;
  EXPECT_EQ(CreateCudaBackend(cuda::DeviceCount(), &error), nullptr);
  EXPECT_NE(error.find("does not exist"), std::string::npos) << error;
}

TEST(CudaBackend, DeviceMemoryFallsByAnAllocation) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto be = cuda_test::Gpu();
  ASSERT_TRUE(be);
  size_t free0 = 0, total = 0;
  ASSERT_TRUE(be->DeviceMemory(&free0, &total));
  EXPECT_GT(total, size_t{1} << 30);
  EXPECT_LE(free0, total);
  const size_t bytes = size_t{1} << 30;
  void* p = be->Allocate(bytes);
  size_t free1 = 0;
  ASSERT_TRUE(be->DeviceMemory(&free1, &total));
  EXPECT_GE(free0 - free1, bytes);
  EXPECT_LE(free0 - free1, bytes + (size_t{64} << 20)) << "1 GiB allocated";
  be->Free(p);
  size_t free2 = 0;
  ASSERT_TRUE(be->DeviceMemory(&free2, &total));
  EXPECT_GE(free2 + (size_t{64} << 20), free0) << "and given back";
}

TEST(CudaBackend, PreparesMatmulWeightsAsBf16AndOtherWeightsAsStored) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->name(), "cuda");
  std::mt19937 rng(21);
  const std::vector<float> w = cuda_test::RandomFloats(7 * 13, rng);
  const Tensor host{w.data(), DType::kF32, 7, 13};

  ASSERT_EQ(gpu->PreparedWeightBytes(host, WeightUse::kMatmul), 7u * 13u * 2u);
  void* m = gpu->Allocate(gpu->PreparedWeightBytes(host, WeightUse::kMatmul));
  const Tensor mt = gpu->PrepareWeight(host, WeightUse::kMatmul, m);
  EXPECT_EQ(mt.data, m);
  EXPECT_EQ(mt.dtype, DType::kBF16);
  EXPECT_EQ(mt.layout, Layout::kRowMajor);
  EXPECT_EQ(mt.rows, 7);
  EXPECT_EQ(mt.cols, 13);
  std::vector<uint16_t> bf16(w.size());
  gpu->CopyToHost(bf16.data(), m, bf16.size() * 2);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(bf16[i], F32ToBf16(w[i])) << i;

  ASSERT_EQ(gpu->PreparedWeightBytes(host, WeightUse::kOther), w.size() * 4);
  void* o = gpu->Allocate(gpu->PreparedWeightBytes(host, WeightUse::kOther));
  const Tensor ot = gpu->PrepareWeight(host, WeightUse::kOther, o);
  EXPECT_EQ(ot.dtype, DType::kF32);
  std::vector<float> back(w.size());
  gpu->CopyToHost(back.data(), o, back.size() * 4);
  EXPECT_EQ(back, w);
  gpu->Free(m);
  gpu->Free(o);
}

// Quantized weights in every format the loader produces (FP8 blocks with partial edges, int8 per
// row, int4 with zero points, MXFP4, and the int8-activation forms) are dequantized at
// PrepareWeight to the BF16 of their float32 values (kernels/quantized_weight.h), and a GEMM over
// them agrees with the CPU backend's over the same quantized weight.
TEST(CudaBackend, PreparesQuantizedWeightsAsTheirDequantizedBf16) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  CpuBackend cpu(2);
  std::mt19937 rng(22);
  const int64_t N = 70, K = 96, M = 5;
  const std::vector<float> w = cuda_test::RandomFloats(N * K, rng);
  const std::vector<float> x = cuda_test::RandomFloats(M * K, rng);
  const Tensor host{w.data(), DType::kF32, N, K};
  for (QuantScheme scheme : {QuantScheme::kInt8, QuantScheme::kFp8, QuantScheme::kInt4, QuantScheme::kInt8A8,
                             QuantScheme::kInt4A8}) {
    QuantizedStorage storage;
    const Tensor q = Quantize(host, scheme, &storage);
    ASSERT_TRUE(q.quantized());
    ASSERT_EQ(gpu->PreparedWeightBytes(q, WeightUse::kMatmul), static_cast<size_t>(N * K * 2));
    void* m = gpu->Allocate(gpu->PreparedWeightBytes(q, WeightUse::kMatmul));
    const Tensor mt = gpu->PrepareWeight(q, WeightUse::kMatmul, m);
    EXPECT_EQ(mt.dtype, DType::kBF16);
    EXPECT_FALSE(mt.quantized());
    std::vector<uint16_t> bf16(static_cast<size_t>(N * K));
    gpu->CopyToHost(bf16.data(), m, bf16.size() * 2);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        ASSERT_EQ(bf16[n * K + k], F32ToBf16(WeightValue(q, n, k))) << static_cast<int>(scheme) << " " << n << "," << k;
    // The GEMM against the CPU backend's on the same quantized weight.
    std::vector<uint8_t> packed(cpu.PreparedWeightBytes(q, WeightUse::kMatmul) + 64);
    void* aligned = packed.data() + (64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64;
    const Tensor ct = cpu.PrepareWeight(q, WeightUse::kMatmul, aligned);
    std::vector<float> want(M * N), got(M * N);
    cpu.Gemm(x.data(), M, ct, want.data(), false);
    float* dx = static_cast<float*>(gpu->Allocate(x.size() * 4));
    float* dy = static_cast<float*>(gpu->Allocate(got.size() * 4));
    gpu->CopyToDevice(dx, x.data(), x.size() * 4);
    gpu->Gemm(dx, M, mt, dy, false);
    gpu->CopyToHost(got.data(), dy, got.size() * 4);
    // BF16 operands on the device (and int8 activations on the CPU for w8a8/w4a8).
    EXPECT_LE(RelNormError(got, want), 2e-2) << static_cast<int>(scheme);
    gpu->Free(m);
    gpu->Free(dx);
    gpu->Free(dy);
  }
}

// Sizes of the test layer: awkward on purpose (nothing a multiple of 64).
constexpr int64_t kV = 50, kD = 96, kH = 4, kHkv = 2, kHd = 24, kN = 12, kK = 3, kLat = 40, kF = 56, kShared = 72;
constexpr int32_t kBlock = 4, kBlocks = 10;
constexpr float kEps = 1e-6f, kTheta = 10000.f;

// Host weights of the layer, each [out, in] (BF16 unless noted).
struct HostLayer {
  std::vector<uint16_t> embed, input_norm, post_norm, q_norm, k_norm, latent_norm;
  std::vector<uint16_t> wq, wk, wv, router, latent_down, latent_up, shared_gate, shared_up, shared_down;
  std::vector<float> wo;  // F32: converted to BF16 by the CUDA backend
  std::vector<float> bias;
  std::vector<std::vector<uint16_t>> expert_gate, expert_up, expert_down;
};

HostLayer MakeHostLayer(std::mt19937& rng) {
  HostLayer h;
  auto norm = [&](int64_t n) {
    std::vector<float> v = cuda_test::RandomFloats(n, rng, 0.1f);
    for (auto& x : v) x += 1.f;
    return cuda_test::ToBf16(v);
  };
  auto linear = [&](int64_t out, int64_t in) { return cuda_test::RandomBf16(out * in, rng, 1.f / std::sqrt(in)); };
  h.embed = cuda_test::RandomBf16(kV * kD, rng);
  h.input_norm = norm(kD);
  h.post_norm = norm(kD);
  h.q_norm = norm(kHd);
  h.k_norm = norm(kHd);
  h.latent_norm = norm(kLat);
  h.wq = linear(kH * kHd, kD);
  h.wk = linear(kHkv * kHd, kD);
  h.wv = linear(kHkv * kHd, kD);
  h.wo = cuda_test::RandomFloats(kD * kH * kHd, rng, 1.f / std::sqrt(kH * kHd));
  h.router = linear(kN, kD);
  h.bias = cuda_test::RandomFloats(kN, rng, 0.05f);
  h.latent_down = linear(kLat, kD);
  h.latent_up = linear(kD, kLat);
  h.shared_gate = linear(kShared, kD);
  h.shared_up = linear(kShared, kD);
  h.shared_down = linear(kD, kShared);
  for (int64_t e = 0; e < kN; ++e) {
    h.expert_gate.push_back(linear(kF, kLat));
    h.expert_up.push_back(linear(kF, kLat));
    h.expert_down.push_back(linear(kLat, kF));
  }
  return h;
}

// One step's inputs: a 6-token prefill and a decode at position 9 (positions 0..8 cached).
struct StepInputs {
  std::vector<int32_t> ids = {3, 17, 49, 0, 25, 8, 41};
  std::vector<int32_t> positions = {0, 1, 2, 3, 4, 5, 9};
  std::vector<int32_t> table0 = {7, 2}, table1 = {4, 9, 0};
  std::vector<float> k_cache, v_cache;  // [kBlocks, kBlock, kHkv, kHd], random
  std::vector<float> extra;             // [T * kK, kD] rows for CombineExpertOutputs
  std::vector<float> extra_weights;     // [T, kK]
  int64_t T() const { return static_cast<int64_t>(ids.size()); }
};

struct LayerResult {
  std::vector<float> x, k_cache, v_cache;
  std::vector<int64_t> counts = std::vector<int64_t>(kN, 1);
};

// Called after the router with its outputs in backend memory: [T, kK] ids, weights; logits [T, kN].
using RouterHook = std::function<void(Backend&, int32_t* ids, float* weights, const float* logits)>;

// Runs the layer on `b` through the Backend interface only.
LayerResult RunLayer(Backend& b, const HostLayer& h, const StepInputs& in, const RouterHook& after_router) {
  std::vector<void*> memory;
  auto prepare = [&](const void* data, DType dtype, int64_t rows, int64_t cols, WeightUse use) {
    const Tensor host{data, dtype, rows, cols};
    const size_t bytes = b.PreparedWeightBytes(host, use);  // 0: read in place
    void* mem = bytes > 0 ? b.Allocate(bytes) : nullptr;
    if (mem) memory.push_back(mem);
    return b.PrepareWeight(host, use, mem);
  };
  auto matmul = [&](const std::vector<uint16_t>& w, int64_t rows, int64_t cols) {
    return prepare(w.data(), DType::kBF16, rows, cols, WeightUse::kMatmul);
  };
  auto other = [&](const std::vector<uint16_t>& w, int64_t rows, int64_t cols) {
    return prepare(w.data(), DType::kBF16, rows, cols, WeightUse::kOther);
  };
  auto buffer = [&](int64_t n) {
    void* mem = b.Allocate(static_cast<size_t>(n) * sizeof(float));
    memory.push_back(mem);
    return static_cast<float*>(mem);
  };
  auto upload = [&](const std::vector<float>& v) {
    float* p = buffer(static_cast<int64_t>(v.size()));
    b.CopyToDevice(p, v.data(), v.size() * sizeof(float));
    return p;
  };
  const int64_t T = in.T();

  const Tensor embed = other(h.embed, kV, kD), input_norm = other(h.input_norm, 1, kD);
  const Tensor post_norm = other(h.post_norm, 1, kD), q_norm = other(h.q_norm, 1, kHd);
  const Tensor k_norm = other(h.k_norm, 1, kHd), latent_norm = other(h.latent_norm, 1, kLat);
  const Tensor wq = matmul(h.wq, kH * kHd, kD), wk = matmul(h.wk, kHkv * kHd, kD), wv = matmul(h.wv, kHkv * kHd, kD);
  const Tensor wo = prepare(h.wo.data(), DType::kF32, kD, kH * kHd, WeightUse::kMatmul);
  const Tensor router = matmul(h.router, kN, kD);
  const Tensor bias = prepare(h.bias.data(), DType::kF32, 1, kN, WeightUse::kOther);
  const Tensor latent_down = matmul(h.latent_down, kLat, kD), latent_up = matmul(h.latent_up, kD, kLat);
  const Tensor shared_gate = matmul(h.shared_gate, kShared, kD), shared_up = matmul(h.shared_up, kShared, kD);
  const Tensor shared_down = matmul(h.shared_down, kD, kShared);
  std::vector<Tensor> eg, eu, ed;
  for (int64_t e = 0; e < kN; ++e) {
    eg.push_back(matmul(h.expert_gate[e], kF, kLat));
    eu.push_back(matmul(h.expert_up[e], kF, kLat));
    ed.push_back(matmul(h.expert_down[e], kLat, kF));
  }

  float* x = buffer(T * kD);
  float* hn = buffer(T * kD);
  float* q = buffer(T * kH * kHd);
  float* k = buffer(T * kHkv * kHd);
  float* v = buffer(T * kHkv * kHd);
  float* o = buffer(T * kH * kHd);
  float* k_cache = upload(in.k_cache);
  float* v_cache = upload(in.v_cache);

  // Attention block.
  b.Embedding(in.ids.data(), T, embed, x);
  b.RmsNorm(x, T, input_norm, kEps, hn);
  b.Gemm(hn, T, wq, q, false);
  b.Gemm(hn, T, wk, k, false);
  b.Gemm(hn, T, wv, v, false);
  b.RmsNorm(q, T * kH, q_norm, kEps, q);
  b.RmsNorm(k, T * kHkv, k_norm, kEps, k);
  std::vector<float> inv_freq(kHd / 2);
  for (int32_t i = 0; i < kHd / 2; ++i)
    inv_freq[i] = 1.0f / std::pow(kTheta, static_cast<float>(2 * i) / static_cast<float>(kHd));
  b.Rope(q, T, in.positions.data(), RopeParams{kH, kHd, kHd, false, inv_freq.data(), 1.f});
  b.Rope(k, T, in.positions.data(), RopeParams{kHkv, kHd, kHd, false, inv_freq.data(), 1.f});
  const AttentionSeq seqs[] = {{0, 6, 0, in.table0.data(), 2}, {6, 1, 9, in.table1.data(), 3}};
  AttentionParams ap;
  ap.q = q;
  ap.k_new = k;
  ap.v_new = v;
  ap.out = o;
  ap.num_heads = kH;
  ap.num_kv_heads = kHkv;
  ap.head_dim = kHd;
  ap.scale = 1.f / std::sqrt(static_cast<float>(kHd));
  ap.cache = KvLayer{k_cache, v_cache, kBlocks, kBlock};
  ap.seqs = seqs;
  ap.num_seqs = 2;
  b.PagedAttention(ap);
  b.Gemm(o, T, wo, x, true);

  // MoE block.
  b.RmsNorm(x, T, post_norm, kEps, hn);
  float* logits = buffer(T * kN);
  b.Gemm(hn, T, router, logits, false);
  auto* ids = static_cast<int32_t*>(static_cast<void*>(buffer(T * kK)));
  float* weights = buffer(T * kK);
  RouterParams rp;
  rp.logits = logits;
  rp.bias = static_cast<const float*>(bias.data);
  rp.num_tokens = T;
  rp.num_experts = kN;
  rp.top_k = kK;
  rp.scoring = ScoringFunc::kSigmoid;
  rp.norm_topk_prob = true;
  rp.routed_scaling_factor = 1.5f;
  rp.topk_ids = ids;
  rp.topk_weights = weights;
  b.Router(rp);
  after_router(b, ids, weights, logits);
  float* z = buffer(T * kLat);
  float* c = buffer(T * kLat);
  b.Gemm(hn, T, latent_down, z, false);
  LayerResult r;
  MoeParams mp;
  mp.z = z;
  mp.num_tokens = T;
  mp.in_width = kLat;
  mp.out_width = kLat;
  mp.topk_ids = ids;
  mp.topk_weights = weights;
  mp.top_k = kK;
  mp.num_experts = kN;
  mp.gate = eg.data();
  mp.up = eu.data();
  mp.down = ed.data();
  mp.act = Activation::kSiTU;
  mp.out = c;
  mp.tokens_per_expert = r.counts.data();
  b.MoeExperts(mp);
  b.RmsNorm(c, T, latent_norm, kEps, c);
  b.Gemm(c, T, latent_up, x, true);
  float* g = buffer(T * kShared);
  float* u = buffer(T * kShared);
  float* a = buffer(T * kShared);
  b.Gemm(hn, T, shared_gate, g, false);
  b.Gemm(hn, T, shared_up, u, false);
  b.GluActivation(g, u, T, kShared, Activation::kSiTU, a);
  b.Gemm(a, T, shared_down, x, true);

  // Combine and add, on given rows.
  float* extra = upload(in.extra);
  float* extra_weights = upload(in.extra_weights);
  float* combined = buffer(T * kD);
  b.CombineExpertOutputs(extra, extra_weights, T, kK, kD, combined);
  b.Add(x, combined, T * kD);

  r.x.resize(T * kD);
  r.k_cache.resize(in.k_cache.size());
  r.v_cache.resize(in.v_cache.size());
  b.CopyToHost(r.x.data(), x, r.x.size() * sizeof(float));
  b.CopyToHost(r.k_cache.data(), k_cache, r.k_cache.size() * sizeof(float));
  b.CopyToHost(r.v_cache.data(), v_cache, r.v_cache.size() * sizeof(float));
  for (void* p : memory) b.Free(p);
  return r;
}

TEST(CudaBackend, RunsAMoeLayerLikeTheCpuBackend) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  CpuBackend cpu(2);
  std::mt19937 rng(22);
  const HostLayer h = MakeHostLayer(rng);
  StepInputs in;
  const int64_t T = in.T(), cache = int64_t{kBlocks} * kBlock * kHkv * kHd;
  in.k_cache = cuda_test::RandomFloats(cache, rng);
  in.v_cache = cuda_test::RandomFloats(cache, rng);
  in.extra = cuda_test::RandomFloats(T * kK * kD, rng);
  in.extra_weights = cuda_test::RandomFloats(T * kK, rng, 0.5f);

  std::vector<int32_t> cpu_ids(T * kK);
  std::vector<float> cpu_weights(T * kK), cpu_logits(T * kN);
  const LayerResult want = RunLayer(cpu, h, in, [&](Backend& b, int32_t* ids, float* weights, const float* logits) {
    b.CopyToHost(cpu_ids.data(), ids, cpu_ids.size() * sizeof(int32_t));
    b.CopyToHost(cpu_weights.data(), weights, cpu_weights.size() * sizeof(float));
    b.CopyToHost(cpu_logits.data(), logits, cpu_logits.size() * sizeof(float));
  });
  const LayerResult got = RunLayer(*gpu, h, in, [&](Backend& b, int32_t* ids, float* weights, const float*) {
    std::vector<int32_t> gpu_ids(T * kK);
    b.CopyToHost(gpu_ids.data(), ids, gpu_ids.size() * sizeof(int32_t));
    for (int64_t i = 0; i < T * kK; ++i) {
      if (gpu_ids[i] == cpu_ids[i]) continue;
      ASSERT_GE(gpu_ids[i], 0);
      ASSERT_LT(gpu_ids[i], kN);
      const float* l = cpu_logits.data() + (i / kK) * kN;
      const float key_gpu = cpu::Sigmoid(l[gpu_ids[i]]) + h.bias[gpu_ids[i]];
      const float key_cpu = cpu::Sigmoid(l[cpu_ids[i]]) + h.bias[cpu_ids[i]];
      EXPECT_NEAR(key_gpu, key_cpu, 2e-2) << "pair " << i << ": routing differs beyond a near tie";
    }
    b.CopyToDevice(ids, cpu_ids.data(), cpu_ids.size() * sizeof(int32_t));
    b.CopyToDevice(weights, cpu_weights.data(), cpu_weights.size() * sizeof(float));
  });
  EXPECT_LE(RelNormError(got.x, want.x), 1e-2);
  EXPECT_LE(RelNormError(got.k_cache, want.k_cache), 1e-2);
  EXPECT_LE(RelNormError(got.v_cache, want.v_cache), 1e-2);
  EXPECT_EQ(got.counts, want.counts);
}

}  // namespace
}  // namespace ls
