// CUDA MoE router, fused: one block per token computes the sigmoid or softmax scores of all
// experts into shared memory, leaves only the best groups' experts eligible under group-limited
// routing, picks the top-K of score + bias by K block-wide arg-max rounds (ties to the lower
// expert index), then weights from the unbiased scores, optionally normalised, times the scaling
// factor. Twin of kernels/cpu/router.cc.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cub/block/block_reduce.cuh>

#include "kernels/cuda/cuda_backend.h"
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

// Dynamic shared memory: scores [N] float, group scores [n_group] float, then taken [N] flags.
__global__ void RouterKernel(const float* __restrict__ logits, const float* __restrict__ bias, int32_t n, int32_t k,
                             int32_t n_group, int32_t topk_group, bool group_max, bool softmax, bool norm_topk_prob,
                             float scaling,
                             int32_t* __restrict__ ids, float* __restrict__ weights) {
  extern __shared__ float scores[];
  float* group_score = scores + n;
  unsigned char* taken = reinterpret_cast<unsigned char*>(group_score + n_group);
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

  if (n_group > 1) {
    // Group-limited selection: each group ranks by the sum of its two largest score + bias (or its
    // largest, group_max); the
    // experts of all but the topk_group best groups (ties: lower group) are marked taken.
    const int32_t size = n / n_group;
    for (int32_t g = threadIdx.x; g < n_group; g += kThreads) {
      float a = -INFINITY, b = -INFINITY;  // the two largest keys
      for (int32_t e = g * size; e < (g + 1) * size; ++e) {
        const float key = scores[e] + (bias ? bias[e] : 0.f);
        if (key > a) {
          b = a;
          a = key;
        } else if (key > b) {
          b = key;
        }
      }
      group_score[g] = group_max ? a : a + b;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int32_t j = 0; j < topk_group; ++j) {
        int32_t best = -1;
        for (int32_t g = 0; g < n_group; ++g)
          if (group_score[g] != INFINITY && (best < 0 || group_score[g] > group_score[best])) best = g;
        if (best >= 0) group_score[best] = INFINITY;  // chosen
      }
    }
    __syncthreads();
    for (int32_t e = threadIdx.x; e < n; e += kThreads)
      if (group_score[e / size] != INFINITY) taken[e] = 1;
    __syncthreads();
  }

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
  LS_CUDA_REQUIRE(p.n_group >= 1 && p.num_experts % p.n_group == 0 && p.topk_group >= 1 && p.topk_group <= p.n_group,
                  "Router: n_group must divide num_experts and topk_group be within [1, n_group]");
  const size_t smem = static_cast<size_t>(p.num_experts) * (sizeof(float) + 1) + p.n_group * sizeof(float);
  if (smem > 48 * 1024) {
    LS_CUDA_CHECK(
        cudaFuncSetAttribute(RouterKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  }
  RouterKernel<<<static_cast<unsigned>(p.num_tokens), kThreads, smem, stream>>>(
      p.logits, p.bias, p.num_experts, p.top_k, p.n_group, p.topk_group, p.group_score == GroupScore::kMax,
      p.scoring == ScoringFunc::kSoftmax,
      p.norm_topk_prob,
      p.routed_scaling_factor, p.topk_ids, p.topk_weights);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace ls::cuda

// CudaBackend::Router: the op on the backend's stream.
namespace ls {

void CudaBackend::Router(const RouterParams& p) {
  Activate();
  cuda::Router(p, stream_);
}

}  // namespace ls
