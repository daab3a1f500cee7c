// One Stable LatentMoE layer's CUDA kernels at K3-like shapes (d 7168, 896 experts, top-16, f 1024,
// latent width 1024 and 2048, one shared expert of width 2048) on one GPU, random BF16 weights
// made on the device: router GEMM and top-K, latent down projection, permute, grouped expert
// GEMMs, combine, latent norm and up projection, shared expert. Decode batches of 1, 8, 64 and
// 256 tokens and a 4096-token prefill. Each case is timed with CUDA events (warm-up, median of
// repeats, rotating over input sets so that the routed experts and activations are not left in
// L2) and set beside two ceilings measured in the same run: a large device-to-device copy (HBM
// bandwidth) and a cuBLASLt dense BF16 GEMM of the same FLOPs. Then Kimi K3's routed experts at
// their real shape (d_lat 3584, f 3072, top-16 of up to 896) in BF16 and in MXFP4 (E2M1 codes,
// E8M0 scales per 32, widened in the grouped GEMMs' load stage): the grouped GEMMs' time and
// weight bytes read for each, and whether the two give the same bits. Prints one JSON document.
// Exits with code 77 when there is no CUDA device.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/moe_scratch.h"
#include "kernels/cuda/weight_codes.cuh"

namespace ls::cuda {
namespace {

constexpr int64_t kD = 7168, kExperts = 896, kF = 1024, kShared = 2048;
constexpr int32_t kTopK = 16;
constexpr int kRotations = 4;  // input sets cycled through
constexpr int kWarmup = 3;

// --- random data made on the device -------------------------------------------------------------

__device__ inline float Uniform(uint64_t seed, int64_t i) {  // in [-1, 1), from a splitmix64 hash
  uint64_t z = seed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (2.f / 16777216.f) - 1.f;
}

// Uniform values of standard deviation `scale`.
__global__ void FillBf16(__nv_bfloat16* p, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16_rn(Uniform(seed, i) * scale * 1.7320508f);
}
__global__ void FillF32(float* p, int64_t n, uint64_t seed, float scale, float offset) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[i] = offset + Uniform(seed, i) * scale * 1.7320508f;
}

uint64_t NextSeed() {
  static uint64_t seed = 0;
  return ++seed * 0x2545f4914f6cdd1dull;
}

template <typename T>
T* Alloc(int64_t n) {
  void* p = nullptr;
  LS_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T)));
  return static_cast<T*>(p);
}
uint16_t* RandomBf16(int64_t n, float scale) {
  auto* p = Alloc<uint16_t>(n);
  FillBf16<<<1024, 256>>>(reinterpret_cast<__nv_bfloat16*>(p), n, NextSeed(), scale);
  LS_CUDA_CHECK_LAUNCH();
  return p;
}
float* RandomF32(int64_t n, float scale, float offset = 0.f) {
  auto* p = Alloc<float>(n);
  FillF32<<<1024, 256>>>(p, n, NextSeed(), scale, offset);
  LS_CUDA_CHECK_LAUNCH();
  return p;
}

// --- timing ---------------------------------------------------------------------------------------

// The routed-expert op over T tokens of `width` values, each routed to top_k of n experts
// (square experts: out_width = in_width).
MoeParams RoutedRows(const float* z, int64_t T, int64_t width, const int32_t* ids, const float* weights, int top_k,
                     int64_t n, GluAct act, float* out) {
  MoeParams p;
  p.z = z;
  p.num_tokens = T;
  p.in_width = width;
  p.out_width = width;
  p.topk_ids = ids;
  p.topk_weights = weights;
  p.top_k = top_k;
  p.num_experts = static_cast<int32_t>(n);
  p.act = act;
  p.out = out;
  return p;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

class EventTimer {
 public:
  EventTimer() {
    LS_CUDA_CHECK(cudaEventCreate(&start_));
    LS_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  // in_graph: while a graph is captured, as event-record nodes that fire on each replay.
  void Start(cudaStream_t s, bool in_graph = false) { Record(start_, s, in_graph); }
  void Stop(cudaStream_t s, bool in_graph = false) { Record(stop_, s, in_graph); }
  double Ms() {
    LS_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.f;
    LS_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  static void Record(cudaEvent_t e, cudaStream_t s, bool in_graph) {
    if (in_graph) {
      LS_CUDA_CHECK(cudaEventRecordWithFlags(e, s, cudaEventRecordExternal));
    } else {
      LS_CUDA_CHECK(cudaEventRecord(e, s));
    }
  }
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// HBM bandwidth ceiling: a 2 GiB device-to-device copy, counting bytes read plus written.
double CopyGbps(cudaStream_t s) {
  const size_t bytes = size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  LS_CUDA_CHECK(cudaMalloc(&a, bytes));
  LS_CUDA_CHECK(cudaMalloc(&b, bytes));
  LS_CUDA_CHECK(cudaMemsetAsync(a, 1, bytes, s));
  EventTimer timer;
  std::vector<double> ms;
  for (int i = 0; i < kWarmup + 10; ++i) {
    timer.Start(s);
    LS_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
    timer.Stop(s);
    if (i >= kWarmup) ms.push_back(timer.Ms());
  }
  LS_CUDA_CHECK(cudaFree(a));
  LS_CUDA_CHECK(cudaFree(b));
  return 2.0 * bytes / (Median(ms) * 1e-3) / 1e9;
}

// Matrix-unit ceiling: a square cuBLASLt BF16 GEMM (FP32 output) with about `flops` operations.
struct DenseResult {
  int64_t n;
  double tflops;
};
DenseResult DenseGemm(CublasLtGemm& gemm, double flops, cudaStream_t s) {
  int64_t n = static_cast<int64_t>(std::llround(std::cbrt(flops / 2.0) / 128.0)) * 128;
  n = std::max<int64_t>(n, 128);
  uint16_t* x = RandomBf16(n * n, 1.f);
  uint16_t* w = RandomBf16(n * n, 0.02f);
  float* y = Alloc<float>(n * n);
  const Tensor wt{w, DType::kBF16, n, n};
  LS_CUDA_CHECK(cudaDeviceSynchronize());  // the fills ran on the default stream
  EventTimer timer;
  std::vector<double> ms;
  for (int i = 0; i < kWarmup + 10; ++i) {
    timer.Start(s);
    gemm.RunBf16(x, n, wt, y, false, s);
    timer.Stop(s);
    if (i >= kWarmup) ms.push_back(timer.Ms());
  }
  LS_CUDA_CHECK(cudaFree(x));
  LS_CUDA_CHECK(cudaFree(w));
  LS_CUDA_CHECK(cudaFree(y));
  return {n, 2.0 * n * n * n / (Median(ms) * 1e-3) / 1e12};
}

// --- the layer ------------------------------------------------------------------------------------

struct LayerWeights {
  int64_t lat = 0;
  Tensor router, latent_down, latent_up, shared_gate, shared_up, shared_down, latent_norm;
  float* bias = nullptr;
  uint16_t *expert_gate = nullptr, *expert_up = nullptr, *expert_down = nullptr;  // [N, ...] each
  ExpertWeight* table = nullptr;                                                  // device [3N]
  ExpertTable experts;
  std::vector<void*> memory;

  explicit LayerWeights(int64_t latent) : lat(latent) {
    auto matmul = [&](int64_t rows, int64_t cols) {
      uint16_t* p = RandomBf16(rows * cols, 1.f / std::sqrt(static_cast<float>(cols)));
      memory.push_back(p);
      return Tensor{p, DType::kBF16, rows, cols};
    };
    router = matmul(kExperts, kD);
    latent_down = matmul(lat, kD);
    latent_up = matmul(kD, lat);
    shared_gate = matmul(kShared, kD);
    shared_up = matmul(kShared, kD);
    shared_down = matmul(kD, kShared);
    float* norm = RandomF32(lat, 0.1f, 1.f);
    bias = RandomF32(kExperts, 0.01f);
    memory.push_back(norm);
    memory.push_back(bias);
    latent_norm = Tensor{norm, DType::kF32, 1, lat};
    expert_gate = RandomBf16(kExperts * kF * lat, 1.f / std::sqrt(static_cast<float>(lat)));
    expert_up = RandomBf16(kExperts * kF * lat, 1.f / std::sqrt(static_cast<float>(lat)));
    expert_down = RandomBf16(kExperts * lat * kF, 1.f / std::sqrt(static_cast<float>(kF)));
    memory.insert(memory.end(), {expert_gate, expert_up, expert_down});
    std::vector<ExpertWeight> host(3 * kExperts);
    for (int64_t e = 0; e < kExperts; ++e) {
      host[e].data = expert_gate + e * kF * lat;
      host[kExperts + e].data = expert_up + e * kF * lat;
      host[2 * kExperts + e].data = expert_down + e * lat * kF;
    }
    table = Alloc<ExpertWeight>(3 * kExperts);
    memory.push_back(table);
    LS_CUDA_CHECK(cudaMemcpy(table, host.data(), host.size() * sizeof(ExpertWeight), cudaMemcpyHostToDevice));
    experts =
        ExpertTable{{table, DType::kBF16}, {table + kExperts, DType::kBF16}, {table + 2 * kExperts, DType::kBF16}, kF};
    LS_CUDA_CHECK(cudaDeviceSynchronize());  // the fills ran on the default stream
  }
  ~LayerWeights() {
    for (void* p : memory) cudaFree(p);
  }
  // Bytes of everything but the routed experts.
  double DenseBytes() const { return 2.0 * (kExperts * kD + 2 * lat * kD + 3 * kShared * kD) + 4.0 * (lat + kExperts); }
  double ExpertBytes() const { return 2.0 * 3 * kF * lat; }
};

// Activations of one input set (h in, x accumulated into) and the step's intermediates.
struct Buffers {
  std::vector<float*> h, x;  // [kRotations] of [T, d]
  float *logits, *weights, *z, *c, *g, *u, *a;
  int32_t* ids;
  std::vector<void*> memory;

  explicit Buffers(int64_t T, int64_t lat) {
    for (int r = 0; r < kRotations; ++r) {
      h.push_back(RandomF32(T * kD, 1.f));
      x.push_back(RandomF32(T * kD, 1.f));
    }
    logits = Alloc<float>(T * kExperts);
    weights = Alloc<float>(T * kTopK);
    ids = Alloc<int32_t>(T * kTopK);
    z = Alloc<float>(T * lat);
    c = Alloc<float>(T * lat);
    g = Alloc<float>(T * kShared);
    u = Alloc<float>(T * kShared);
    a = Alloc<float>(T * kShared);
    memory.insert(memory.end(), h.begin(), h.end());
    memory.insert(memory.end(), x.begin(), x.end());
    memory.insert(memory.end(), {logits, weights, ids, z, c, g, u, a});
    LS_CUDA_CHECK(cudaDeviceSynchronize());  // the fills ran on the default stream
  }
  ~Buffers() {
    for (void* p : memory) cudaFree(p);
  }
};

struct Layer {
  const LayerWeights& w;
  Buffers& b;
  CublasLtGemm& gemm;
  MoeScratch& scratch;
  int64_t T;
  cudaStream_t s;

  MoeParams Moe() const { return RoutedRows(b.z, T, w.lat, b.ids, b.weights, kTopK, kExperts, Activation::kSiTU, b.c); }

  void Route(int r) {
    gemm.Run(b.h[r], T, w.router, b.logits, false, s);
    RouterParams p;
    p.logits = b.logits;
    p.bias = w.bias;
    p.num_tokens = T;
    p.num_experts = kExperts;
    p.top_k = kTopK;
    p.scoring = ScoringFunc::kSigmoid;
    p.norm_topk_prob = true;
    p.routed_scaling_factor = 2.5f;
    p.topk_ids = b.ids;
    p.topk_weights = b.weights;
    Router(p, s);
  }

  // The whole layer on input set r; the grouped GEMMs between the two events.
  void Run(int r, EventTimer& grouped, bool in_graph) {
    Route(r);
    gemm.Run(b.h[r], T, w.latent_down, b.z, false, s);
    const MoeParams p = Moe();
    MoePermute(p, scratch, s);
    grouped.Start(s, in_graph);
    MoeGroupedGemms(p, w.experts, scratch, s);
    grouped.Stop(s, in_graph);
    MoeCombine(p, scratch, s);
    RmsNorm(b.c, T, w.latent_norm, 1e-6f, b.c, s);
    gemm.Run(b.c, T, w.latent_up, b.x[r], true, s);
    gemm.Run(b.h[r], T, w.shared_gate, b.g, false, s);
    gemm.Run(b.h[r], T, w.shared_up, b.u, false, s);
    GluActivation(b.g, b.u, T, kShared, Activation::kSiTU, b.a, s);
    gemm.Run(b.a, T, w.shared_down, b.x[r], true, s);
  }

  // The layer on input set r as a graph (scratch memory must already have its size: capture
  // allows no allocation or synchronisation).
  cudaGraphExec_t Capture(int r, EventTimer& grouped) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    LS_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    Run(r, grouped, true);
    LS_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    LS_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    LS_CUDA_CHECK(cudaGraphDestroy(graph));
    return exec;
  }

  // Distinct experts the tokens of input set r are routed to.
  int64_t ActiveExperts(int r) {
    Route(r);
    std::vector<int32_t> ids(T * kTopK);
    LS_CUDA_CHECK(cudaMemcpyAsync(ids.data(), b.ids, ids.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, s));
    LS_CUDA_CHECK(cudaStreamSynchronize(s));
    return static_cast<int64_t>(std::set<int32_t>(ids.begin(), ids.end()).size());
  }
};

// --- Kimi K3's routed experts: BF16 against MXFP4 ---------------------------------------------

// K3's expert shape: GLUs of width 3072 in the 3584-wide latent, top-16 of 896.
constexpr int64_t kK3Latent = 3584, kK3F = 3072, kK3Experts = 896, kMxfp4Group = 32;

__global__ void FillBytes(uint8_t* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<uint8_t>((Uniform(seed, i) + 1.f) * 128.f);
}
// E8M0 exponents 2^-10 .. 2^-8: with random E2M1 codes (RMS 2.9), weights of RMS about 0.006.
__global__ void FillE8M0(uint8_t* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<uint8_t>(117 + static_cast<int>((Uniform(seed, i) + 1.f) * 1.5f));
}
// The BF16 of MXFP4 weights [rows, cols], with the arithmetic of the grouped GEMMs' load stage.
__global__ void DequantizeMxfp4(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols,
                                uint16_t* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows * cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const uint32_t code = (codes[i / 2] >> (4 * (c & 1))) & 15u;
    const float scale = ScaleValue(scales, DType::kE8M0, r * (cols / kMxfp4Group) + c / kMxfp4Group);
    out[i] = static_cast<uint16_t>(WeightBf16<DType::kE2M1>(code, 0, scale));
  }
}

// Every expert's gate, up and down twice: MXFP4 (codes, E8M0 scales per 32) and the BF16 they
// dequantize to, with a grouped-GEMM table for each.
struct K3Experts {
  int64_t n = 0;
  ExpertTable bf16, mxfp4;
  std::vector<void*> memory;

  static double Bf16Bytes() { return 2.0 * 3 * kK3F * kK3Latent; }
  static double Mxfp4Bytes() { return 3.0 * kK3F * kK3Latent * (0.5 + 1.0 / kMxfp4Group); }

  explicit K3Experts(int64_t experts) : n(experts) {
    const int64_t weights = kK3F * kK3Latent;  // of one matrix (gate, up: [f, d_lat]; down: [d_lat, f])
    std::vector<ExpertWeight> host_bf16(3 * n), host_mxfp4(3 * n);
    for (int64_t m = 0; m < 3; ++m) {
      const int64_t rows = m < 2 ? kK3F : kK3Latent, cols = weights / rows;
      auto* codes = Alloc<uint8_t>(n * weights / 2);
      auto* scales = Alloc<uint8_t>(n * weights / kMxfp4Group);
      auto* values = Alloc<uint16_t>(n * weights);
      memory.insert(memory.end(), {codes, scales, values});
      FillBytes<<<1024, 256>>>(codes, n * weights / 2, NextSeed());
      FillE8M0<<<1024, 256>>>(scales, n * weights / kMxfp4Group, NextSeed());
      LS_CUDA_CHECK_LAUNCH();
      for (int64_t e = 0; e < n; ++e) {
        const uint8_t* c = codes + e * weights / 2;
        const uint8_t* sc = scales + e * weights / kMxfp4Group;
        DequantizeMxfp4<<<1024, 256>>>(c, sc, rows, cols, values + e * weights);
        host_bf16[m * n + e].data = values + e * weights;
        ExpertWeight& q = host_mxfp4[m * n + e];
        q.data = c;
        q.scale = sc;
        q.scale_dtype = DType::kE8M0;
        q.block_rows = 1;
        q.block_cols = kMxfp4Group;
      }
      LS_CUDA_CHECK_LAUNCH();
    }
    bf16 = Upload(host_bf16, DType::kBF16);
    mxfp4 = Upload(host_mxfp4, DType::kE2M1);
    LS_CUDA_CHECK(cudaDeviceSynchronize());  // the fills ran on the default stream
  }
  ~K3Experts() {
    for (void* p : memory) cudaFree(p);
  }
  ExpertTable Upload(const std::vector<ExpertWeight>& host, DType codes) {
    auto* table = Alloc<ExpertWeight>(3 * n);
    memory.push_back(table);
    LS_CUDA_CHECK(cudaMemcpy(table, host.data(), host.size() * sizeof(ExpertWeight), cudaMemcpyHostToDevice));
    return ExpertTable{{table, codes}, {table + n, codes}, {table + 2 * n, codes}, kK3F};
  }
};

// Distinct experts of each of T tokens (top-16 of n), from a seeded generator.
std::vector<int32_t> RandomExpertIds(int64_t T, int64_t n, std::mt19937& rng, int top_k = kTopK) {
  std::vector<int32_t> ids(T * top_k), all(n);
  for (int64_t t = 0; t < T; ++t) {
    std::iota(all.begin(), all.end(), 0);
    for (int k = 0; k < top_k; ++k) {
      std::uniform_int_distribution<int64_t> pick(k, n - 1);
      std::swap(all[k], all[pick(rng)]);
      ids[t * top_k + k] = all[k];
    }
  }
  return ids;
}

// The grouped expert GEMMs (gate and up with the GLU, then down) of K3's shape over BF16 and over
// MXFP4 weights, on the same routed rows: time, weight bytes read, and whether the outputs are the
// same bits. Prints the "k3_mxfp4" member of the document; false when the outputs differ.
bool K3Mxfp4(cudaStream_t s, double copy_gbps) {
  size_t free_bytes = 0, total_bytes = 0;
  LS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // K3's 896 experts where 60% of the free memory holds both copies, fewer otherwise.
  const double per_expert = K3Experts::Bf16Bytes() + K3Experts::Mxfp4Bytes();
  const int64_t n = std::clamp<int64_t>(static_cast<int64_t>(0.6 * free_bytes / per_expert), kTopK, kK3Experts);
  K3Experts w(n);
  MoeScratch scratch;
  std::mt19937 rng(3);
  std::printf(
      ",\n  \"k3_mxfp4\": {\"d_lat\": %lld, \"f\": %lld, \"top_k\": %d, \"experts\": %lld, "
      "\"bytes_per_expert\": {\"bf16\": %.0f, \"mxfp4\": %.0f},\n"
      "    \"timing\": \"grouped GEMMs only (gate+up with the GLU, then down), median over repeats after %d "
      "warm-ups, the two formats alternating on the same routed rows, %d routings cycled\",\n    \"cases\": [\n",
      static_cast<long long>(kK3Latent), static_cast<long long>(kK3F), kTopK, static_cast<long long>(n),
      K3Experts::Bf16Bytes(), K3Experts::Mxfp4Bytes(), kWarmup, kRotations);
  bool first = true, all_identical = true;
  for (const int64_t T : {int64_t{1}, int64_t{8}, int64_t{64}, int64_t{256}, int64_t{4096}}) {
    float* z = RandomF32(T * kK3Latent, 1.f);
    float* weights = RandomF32(T * kTopK, 0.1f, 0.1f);
    float* out = Alloc<float>(T * kK3Latent);
    std::vector<int32_t*> ids;
    double active = 0;
    for (int r = 0; r < kRotations; ++r) {
      const std::vector<int32_t> host = RandomExpertIds(T, n, rng);
      active += static_cast<double>(std::set<int32_t>(host.begin(), host.end()).size()) / kRotations;
      ids.push_back(Alloc<int32_t>(T * kTopK));
      LS_CUDA_CHECK(cudaMemcpy(ids.back(), host.data(), host.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    }
    LS_CUDA_CHECK(cudaDeviceSynchronize());
    MoeParams p = RoutedRows(z, T, kK3Latent, ids[0], weights, kTopK, n, GluAct{Activation::kSiTU, 4.f, 25.f}, out);
    EventTimer timer;
    std::vector<double> ms[2];
    const int reps = T >= 4096 ? 6 : 20;
    bool identical = true;
    for (int i = 0; i < kWarmup + reps; ++i) {
      p.topk_ids = ids[i % kRotations];
      MoePermute(p, scratch, s);
      for (int j = 0; j < 2; ++j) {
        const int f = (i + j) % 2;  // 0: BF16, 1: MXFP4; the order alternates
        timer.Start(s);
        MoeGroupedGemms(p, f == 0 ? w.bf16 : w.mxfp4, scratch, s);
        timer.Stop(s);
        const double t = timer.Ms();
        if (i >= kWarmup) ms[f].push_back(t);
      }
      if (i == kWarmup && T <= 256) {  // the two formats' expert outputs, bit for bit
        const size_t bytes = static_cast<size_t>(T * kTopK * kK3Latent) * sizeof(float);
        std::vector<uint8_t> y[2];
        for (int f = 0; f < 2; ++f) {
          MoeGroupedGemms(p, f == 0 ? w.bf16 : w.mxfp4, scratch, s);
          y[f].resize(bytes);
          LS_CUDA_CHECK(cudaMemcpyAsync(y[f].data(), scratch.y, bytes, cudaMemcpyDeviceToHost, s));
          LS_CUDA_CHECK(cudaStreamSynchronize(s));
        }
        identical = y[0] == y[1];
      }
    }
    const double bf16_ms = Median(ms[0]), mxfp4_ms = Median(ms[1]);
    const double bf16_bytes = active * K3Experts::Bf16Bytes(), mxfp4_bytes = active * K3Experts::Mxfp4Bytes();
    std::printf(
        "%s      {\"tokens\": %lld, \"active_experts\": %.1f, \"bf16_ms\": %.4f, \"mxfp4_ms\": %.4f, "
        "\"mxfp4_over_bf16_time\": %.3f, \"bf16_weight_bytes\": %.4g, \"mxfp4_weight_bytes\": %.4g, "
        "\"bf16_weight_gbps\": %.1f, \"mxfp4_weight_gbps\": %.1f, \"mxfp4_gbps_fraction_of_copy\": %.3f, "
        "\"outputs_bit_identical\": %s}",
        first ? "" : ",\n", static_cast<long long>(T), active, bf16_ms, mxfp4_ms, mxfp4_ms / bf16_ms, bf16_bytes,
        mxfp4_bytes, bf16_bytes / (bf16_ms * 1e-3) / 1e9, mxfp4_bytes / (mxfp4_ms * 1e-3) / 1e9,
        mxfp4_bytes / (mxfp4_ms * 1e-3) / 1e9 / copy_gbps, T > 256 ? "null" : (identical ? "true" : "false"));
    std::fflush(stdout);
    first = false;
    all_identical &= identical;
    std::fprintf(stderr, "moe_kernels: K3 experts, T %lld: BF16 %.3f ms, MXFP4 %.3f ms%s\n", static_cast<long long>(T),
                 bf16_ms, mxfp4_ms, T > 256 || identical ? "" : " (outputs DIFFER)");
    for (void* q : std::vector<void*>{z, weights, out}) LS_CUDA_CHECK(cudaFree(q));
    for (int32_t* q : ids) LS_CUDA_CHECK(cudaFree(q));
  }
  std::printf("\n    ]\n  }");
  return all_identical;
}

// FP8 e4m3 codes, never the NaN codes 0x7f and 0xff.
__global__ void FillE4M3(uint8_t* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint8_t b = static_cast<uint8_t>((Uniform(seed, i) + 1.f) * 127.5f);
    p[i] = (b & 0x7fu) == 0x7fu ? static_cast<uint8_t>(b ^ 1u) : b;
  }
}

// DeepSeek-V3's routed experts (d 7168, f 2048, top-8) in FP8 with 128 × 128 block scales: the
// grouped GEMMs widening the codes to BF16 in their load stage (BF16 tensor cores) against the FP8
// tensor-core GEMMs over activations rounded to e4m3 per 128 values, on the same routed rows: time,
// weight bytes read, and the relative difference of the outputs (the FP8 rounding of the
// activations). Prints the "fp8_experts" member of the document.
void Fp8Experts(cudaStream_t s, double copy_gbps) {
  constexpr int64_t d = 7168, f = 2048, top_k = 8, max_experts = 256;
  size_t free_bytes = 0, total_bytes = 0;
  LS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const double per_expert = 3.0 * d * f * (1.0 + 1.0 / (128 * 128 / 4));
  const int64_t n = std::clamp<int64_t>(static_cast<int64_t>(0.5 * free_bytes / per_expert), top_k, max_experts);
  std::vector<void*> memory;
  std::vector<ExpertWeight> host(3 * n);
  for (int64_t m = 0; m < 3; ++m) {
    const int64_t rows = m < 2 ? f : d, cols = d * f / rows, blocks = (rows / 128) * (cols / 128);
    auto* codes = Alloc<uint8_t>(n * d * f);
    float* scales = RandomF32(n * blocks, 0.5f / 448, 1.f / 448);
    memory.insert(memory.end(), {codes, scales});
    FillE4M3<<<1024, 256>>>(codes, n * d * f, NextSeed());
    LS_CUDA_CHECK_LAUNCH();
    for (int64_t e = 0; e < n; ++e) {
      ExpertWeight& w = host[m * n + e];
      w.data = codes + e * d * f;
      w.scale = scales + e * blocks;
      w.scale_dtype = DType::kF32;
      w.block_rows = w.block_cols = 128;
    }
  }
  auto* table = Alloc<ExpertWeight>(3 * n);
  memory.push_back(table);
  LS_CUDA_CHECK(cudaMemcpy(table, host.data(), host.size() * sizeof(ExpertWeight), cudaMemcpyHostToDevice));
  ExpertTable widened{{table, DType::kF8E4M3}, {table + n, DType::kF8E4M3}, {table + 2 * n, DType::kF8E4M3}, f};
  widened.fp8_blocks = true;
  ExpertTable fp8 = widened;
  fp8.fp8 = true;
  MoeScratch scratch;
  std::mt19937 rng(5);
  std::printf(
      ",\n  \"fp8_experts\": {\"d\": %lld, \"f\": %lld, \"top_k\": %lld, \"experts\": %lld, "
      "\"bytes_per_expert\": %.0f,\n    \"timing\": \"grouped GEMMs only (gate+up with the GLU, then down), median "
      "over repeats after %d warm-ups, the two paths alternating on the same routed rows\",\n    \"cases\": [\n",
      static_cast<long long>(d), static_cast<long long>(f), static_cast<long long>(top_k), static_cast<long long>(n),
      per_expert, kWarmup);
  bool first = true;
  for (const int64_t T : {int64_t{1}, int64_t{64}, int64_t{512}, int64_t{4096}}) {
    float* z = RandomF32(T * d, 1.f);
    float* weights = RandomF32(T * top_k, 0.1f, 0.1f);
    float* out = Alloc<float>(T * d);
    const std::vector<int32_t> host_ids = RandomExpertIds(T, n, rng, top_k);
    const double active = static_cast<double>(std::set<int32_t>(host_ids.begin(), host_ids.end()).size());
    int32_t* ids = Alloc<int32_t>(T * top_k);
    LS_CUDA_CHECK(cudaMemcpy(ids, host_ids.data(), host_ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    const MoeParams p = RoutedRows(z, T, d, ids, weights, top_k, n, Activation::kSiLU, out);
    MoePermute(p, scratch, s);
    EventTimer timer;
    std::vector<double> ms[2];
    const int reps = T >= 4096 ? 6 : 20;
    for (int i = 0; i < kWarmup + reps; ++i) {
      for (int j = 0; j < 2; ++j) {
        const int path = (i + j) % 2;  // 0: codes widened to BF16, 1: FP8 tensor cores
        timer.Start(s);
        MoeGroupedGemms(p, path == 0 ? widened : fp8, scratch, s);
        timer.Stop(s);
        if (i >= kWarmup) ms[path].push_back(timer.Ms());
      }
    }
    // The outputs of the two paths: relative L2 difference over all rows (up to 512 tokens: the
    // largest case's outputs would be 2 GB on the host).
    double diff = 0, norm = 0;
    if (T <= 512) {
      const size_t count = static_cast<size_t>(T * top_k * d);
      std::vector<float> y[2];
      for (int path = 0; path < 2; ++path) {
        MoeGroupedGemms(p, path == 0 ? widened : fp8, scratch, s);
        y[path].resize(count);
        LS_CUDA_CHECK(cudaMemcpyAsync(y[path].data(), scratch.y, count * sizeof(float), cudaMemcpyDeviceToHost, s));
        LS_CUDA_CHECK(cudaStreamSynchronize(s));
      }
      for (size_t i = 0; i < count; ++i) {
        diff += (static_cast<double>(y[1][i]) - y[0][i]) * (static_cast<double>(y[1][i]) - y[0][i]);
        norm += static_cast<double>(y[0][i]) * y[0][i];
      }
    }
    char difference[32] = "null";
    if (T <= 512) std::snprintf(difference, sizeof difference, "%.3g", std::sqrt(diff / std::max(norm, 1e-30)));
    const double widened_ms = Median(ms[0]), fp8_ms = Median(ms[1]), bytes = active * per_expert;
    std::printf(
        "%s      {\"tokens\": %lld, \"active_experts\": %.0f, \"widened_bf16_ms\": %.4f, \"fp8_ms\": %.4f, "
        "\"fp8_over_widened_time\": %.3f, \"weight_bytes\": %.4g, \"fp8_weight_gbps\": %.1f, "
        "\"fp8_gbps_fraction_of_copy\": %.3f, \"fp8_tflops\": %.1f, \"relative_l2_difference\": %s}",
        first ? "" : ",\n", static_cast<long long>(T), active, widened_ms, fp8_ms, fp8_ms / widened_ms, bytes,
        bytes / (fp8_ms * 1e-3) / 1e9, bytes / (fp8_ms * 1e-3) / 1e9 / copy_gbps,
        2.0 * 3 * d * f * T * top_k / (fp8_ms * 1e-3) / 1e12, difference);
    std::fflush(stdout);
    first = false;
    std::fprintf(stderr, "moe_kernels: FP8 experts, T %lld: widened %.3f ms, FP8 %.3f ms\n", static_cast<long long>(T),
                 widened_ms, fp8_ms);
    for (void* q : std::vector<void*>{z, weights, out, ids}) LS_CUDA_CHECK(cudaFree(q));
  }
  std::printf("\n    ]\n  }");
  for (void* q : memory) LS_CUDA_CHECK(cudaFree(q));
}

std::string DeviceName() {
  cudaDeviceProp prop{};
  LS_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return prop.name;
}

int Main() {
  if (DeviceCount() == 0) {
    std::fprintf(stderr, "moe_kernels: no CUDA device; nothing to measure\n");
    return 77;
  }
  LS_CUDA_CHECK(cudaSetDevice(0));
  cudaStream_t s = nullptr;
  LS_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::string error;
  auto gemm = CublasLtGemm::Create(&error);
  if (!gemm) {
    std::fprintf(stderr, "moe_kernels: %s\n", error.c_str());
    return 1;
  }
  const double copy_gbps = CopyGbps(s);
  std::fprintf(stderr, "moe_kernels: device-to-device copy %.0f GB/s\n", copy_gbps);

  std::printf("{\n  \"benchmark\": \"moe_kernels\",\n  \"device\": \"%s\",\n", DeviceName().c_str());
  std::printf("  \"shape\": {\"d\": %lld, \"experts\": %lld, \"top_k\": %d, \"f\": %lld, \"shared_width\": %lld},\n",
              static_cast<long long>(kD), static_cast<long long>(kExperts), kTopK, static_cast<long long>(kF),
              static_cast<long long>(kShared));
  std::printf("  \"copy_gbps\": %.1f,\n", copy_gbps);
  std::printf(
      "  \"timing\": \"median over repeats after %d warm-ups, cycling %d input sets; time_ms from CUDA "
      "graph replays of the layer, eager_time_ms launched op by op\",\n",
      kWarmup, kRotations);
  std::printf(
      "  \"bytes_counted\": \"BF16 weights of the dense projections, the router and the experts routed to "
      "(distinct over the batch), float32 h read once and x read and written once\",\n");
  std::printf("  \"cases\": [\n");
  bool first = true;
  for (const int64_t lat : {int64_t{1024}, int64_t{2048}}) {
    LayerWeights w(lat);
    MoeScratch scratch;
    for (const int64_t T : {int64_t{1}, int64_t{8}, int64_t{64}, int64_t{256}, int64_t{4096}}) {
      Buffers b(T, lat);
      Layer layer{w, b, *gemm, scratch, T, s};
      EventTimer total, grouped;
      // Eager: launched op by op, host launch gaps included; this also sizes the scratch memory.
      std::vector<double> eager_ms, layer_ms, grouped_ms;
      const int reps = T >= 4096 ? 10 : 30;
      for (int i = 0; i < kWarmup + reps; ++i) {
        total.Start(s);
        layer.Run(i % kRotations, grouped, false);
        total.Stop(s);
        if (i >= kWarmup) eager_ms.push_back(total.Ms());
      }
      // Graph replays: the kernels back to back.
      std::vector<cudaGraphExec_t> graphs;
      for (int r = 0; r < kRotations; ++r) graphs.push_back(layer.Capture(r, grouped));
      for (int i = 0; i < kWarmup + reps; ++i) {
        total.Start(s);
        LS_CUDA_CHECK(cudaGraphLaunch(graphs[i % kRotations], s));
        total.Stop(s);
        const double ms = total.Ms(), gms = grouped.Ms();
        if (i >= kWarmup) {
          layer_ms.push_back(ms);
          grouped_ms.push_back(gms);
        }
      }
      for (cudaGraphExec_t g : graphs) LS_CUDA_CHECK(cudaGraphExecDestroy(g));
      LS_CUDA_CHECK(cudaStreamSynchronize(s));
      double active = 0;
      for (int r = 0; r < kRotations; ++r) active += static_cast<double>(layer.ActiveExperts(r)) / kRotations;

      const double t_ms = Median(layer_ms), g_ms = Median(grouped_ms);
      const double bytes = w.DenseBytes() + active * w.ExpertBytes() + 3.0 * 4.0 * T * kD;
      const double flops = 2.0 * T * (kExperts * kD + 2.0 * lat * kD + 3.0 * kShared * kD + kTopK * 3.0 * kF * lat);
      const double expert_flops = 2.0 * T * kTopK * 3.0 * kF * lat;
      const DenseResult dense = DenseGemm(*gemm, flops, s);
      const double gbps = bytes / (t_ms * 1e-3) / 1e9, tflops = flops / (t_ms * 1e-3) / 1e12;
      std::printf(
          "%s    {\"d_lat\": %lld, \"tokens\": %lld, \"mode\": \"%s\", \"time_ms\": %.4f, "
          "\"eager_time_ms\": %.4f, "
          "\"grouped_gemm_ms\": %.4f, \"grouped_gemm_share\": %.3f, \"active_experts\": %.1f, "
          "\"bytes\": %.4g, \"gbps\": %.1f, \"gbps_fraction_of_copy\": %.3f, \"flops\": %.4g, "
          "\"tflops\": %.2f, \"dense_gemm_n\": %lld, \"dense_gemm_tflops\": %.2f, "
          "\"tflops_fraction_of_dense\": %.3f, \"grouped_gemm_weight_gbps\": %.1f, "
          "\"grouped_gemm_tflops\": %.2f}",
          first ? "" : ",\n", static_cast<long long>(lat), static_cast<long long>(T), T >= 4096 ? "prefill" : "decode",
          t_ms, Median(eager_ms), g_ms, g_ms / t_ms, active, bytes, gbps, gbps / copy_gbps, flops, tflops,
          static_cast<long long>(dense.n), dense.tflops, tflops / dense.tflops,
          active * w.ExpertBytes() / (g_ms * 1e-3) / 1e9, expert_flops / (g_ms * 1e-3) / 1e12);
      std::fflush(stdout);
      first = false;
      std::fprintf(stderr, "moe_kernels: d_lat %lld T %lld: %.3f ms (grouped GEMMs %.3f ms)\n",
                   static_cast<long long>(lat), static_cast<long long>(T), t_ms, g_ms);
    }
  }
  std::printf("\n  ]");
  const bool identical = K3Mxfp4(s, copy_gbps);
  Fp8Experts(s, copy_gbps);
  std::printf("\n}\n");
  LS_CUDA_CHECK(cudaStreamDestroy(s));
  if (!identical) std::fprintf(stderr, "moe_kernels: the grouped GEMMs over MXFP4 and over its BF16 differ\n");
  return identical ? 0 : 1;
}

}  // namespace
}  // namespace ls::cuda

int main() { return ls::cuda::Main(); }
