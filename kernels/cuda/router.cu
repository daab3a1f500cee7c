// CUDA MoE router, fused: one block per token computes the sigmoid or softmax scores of all
// experts into shared memory, picks the top-K of score + bias by K block-wide arg-max rounds
// (ties to the lower expert index), then weights from the unbiased scores, optionally
// normalised, times the scaling factor. Twin of kernels/cpu/router.cc.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cub/block/block_reduce.cuh>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"

namespace ls::cuda {
namespace {

constexpr int kThreads = 256;

struct Candidate {
  float key;
  int32_t index;
};

// Whether b ranks before a: a strictly greater key, or an equal key at a lower index.
__device__ inline bool Before(const Candidate& b, const Candidate& a) {
  return b.key > a.key || (b.key == a.key && b.index < a.index);
}

struct BetterOf {
  __device__ Candidate operator()(const Candidate& a, const Candidate& b) const { return Before(b, a) ? b : a; }
};

struct MaxOf {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Dynamic shared memory: scores [N] float, then taken [N] flags.
__global__ void RouterKernel(const float* __restrict__ logits, const float* __restrict__ bias, int32_t n, int32_t k,
                             bool softmax, bool norm_topk_prob, float scaling, int32_t* __restrict__ ids,
                             float* __restrict__ weights) {
  extern __shared__ float scores[];
  unsigned char* taken = reinterpret_cast<unsigned char*>(scores + n);
  using FloatReduce = cub::BlockReduce<float, kThreads>;
  using CandidateReduce = cub::BlockReduce<Candidate, kThreads>;
  __shared__ union {
    typename FloatReduce::TempStorage f;
    typename CandidateReduce::TempStorage c;
  } tmp;
  __shared__ float shared_value;

  const int64_t t = blockIdx.x;
  const float* l = logits + t * n;
  int32_t* out_ids = ids + t * k;
  float* out_w = weights + t * k;

  if (softmax) {
    float mx = -INFINITY;
    for (int32_t e = threadIdx.x; e < n; e += kThreads) mx = fmaxf(mx, l[e]);
    mx = FloatReduce(tmp.f).Reduce(mx, MaxOf());
    if (threadIdx.x == 0) shared_value = mx;
    __syncthreads();
    mx = shared_value;
    float sum = 0.f;
    for (int32_t e = threadIdx.x; e < n; e += kThreads) {
      const float v = expf(l[e] - mx);
      scores[e] = v;
      sum += v;
    }
    __syncthreads();  // tmp and shared_value are reused
    sum = FloatReduce(tmp.f).Sum(sum);
    if (threadIdx.x == 0) shared_value = sum;
    __syncthreads();
    sum = shared_value;
    for (int32_t e = threadIdx.x; e < n; e += kThreads) scores[e] /= sum;
  } else {
    for (int32_t e = threadIdx.x; e < n; e += kThreads) scores[e] = Sigmoid(l[e]);
  }
  for (int32_t e = threadIdx.x; e < n; e += kThreads) taken[e] = 0;
  __syncthreads();

  for (int32_t j = 0; j < k; ++j) {
    Candidate best{-INFINITY, INT_MAX};
    for (int32_t e = threadIdx.x; e < n; e += kThreads) {
      if (taken[e]) continue;
      const Candidate c{scores[e] + (bias ? bias[e] : 0.f), e};
      if (Before(c, best)) best = c;
    }
    best = CandidateReduce(tmp.c).Reduce(best, BetterOf());
    if (threadIdx.x == 0) {
      int32_t e = best.index;
      if (e == INT_MAX) {  // every key left is NaN: take the lowest free index
        e = 0;
        while (taken[e]) ++e;
      }
      taken[e] = 1;
      out_ids[j] = e;
    }
    __syncthreads();
  }

  if (threadIdx.x == 0) {
    float sum = 0.f;
    for (int32_t j = 0; j < k; ++j) sum += (out_w[j] = scores[out_ids[j]]);
    const float scale = scaling / (norm_topk_prob && sum > 0.f ? sum : 1.f);
    for (int32_t j = 0; j < k; ++j) out_w[j] *= scale;
  }
}

}  // namespace

void Router(const RouterParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0) return;
  LS_CUDA_REQUIRE(p.top_k >= 1 && p.top_k <= p.num_experts, "Router: top_k must be in [1, num_experts]");
  const size_t smem = static_cast<size_t>(p.num_experts) * (sizeof(float) + 1);
  if (smem > 48 * 1024) {
    LS_CUDA_CHECK(
        cudaFuncSetAttribute(RouterKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  }
  RouterKernel<<<static_cast<unsigned>(p.num_tokens), kThreads, smem, stream>>>(
      p.logits, p.bias, p.num_experts, p.top_k, p.scoring == ScoringFunc::kSoftmax, p.norm_topk_prob,
      p.routed_scaling_factor, p.topk_ids, p.topk_weights);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace ls::cuda
