// CUDA expanded MLA attention (ExpandedLatentAttentionParams): one block per (new token, head)
// runs an online softmax over the tile's keys in chunks of kChunk — a warp per key for the scores
// [q_nope · k_nope | q_rope · k_rope], lanes across the head — and accumulates Σ p · v with
// threads across the value dims, continuing from the running max, sum and weighted sum that
// earlier tiles left in `state` and `out`. Twin of kernels/cpu/expanded_latent_attention.cc.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace ls::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 32;
constexpr int kMaxDims = 8;  // value dims per thread: v_dim up to 1024

// Grid: (new tokens, heads). Dynamic shared memory: q [nope + rope] | scores [kChunk] | max, sum, rescale.
__global__ void ExpandedLatentAttentionKernel(ExpandedLatentAttentionParams p) {
  extern __shared__ float smem[];
  const int32_t nope = p.nope_dim, qh = p.nope_dim + p.rope_dim, vd = p.v_dim, H = p.num_heads;
  float* sq = smem;
  float* sc = sq + qh;
  float* st = sc + kChunk;
  const int32_t i = blockIdx.x, h = blockIdx.y;
  const int64_t th = (static_cast<int64_t>(p.seq.token_offset) + i) * H + h;
  const int32_t keys = min(p.num_keys, max(0, p.seq.start_pos + i - p.first_key + 1));
  float* out = p.out + th * vd;
  float* state = p.state + th * 2;
  for (int32_t j = threadIdx.x; j < qh; j += kThreads) sq[j] = p.q[th * qh + j];
  if (threadIdx.x == 0) {
    st[0] = p.first_tile ? -INFINITY : state[0];
    st[1] = p.first_tile ? 0.f : state[1];
  }
  __syncthreads();
  float acc[kMaxDims];
#pragma unroll
  for (int k = 0; k < kMaxDims; ++k) {
    const int32_t d = threadIdx.x + kThreads * k;
    acc[k] = !p.first_tile && d < vd ? out[d] : 0.f;
  }
  const int32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int32_t start = 0; start < keys; start += kChunk) {
    const int32_t n = min(kChunk, keys - start);
    for (int32_t j = warp; j < n; j += kWarps) {
      const int64_t key = start + j;
      const float* kn = p.k_nope + (key * H + h) * nope;
      const float* kr = p.k_rope + key * p.k_rope_stride;
      float dot = 0.f;
      for (int32_t d = lane; d < qh; d += 32) dot += sq[d] * (d < nope ? kn[d] : kr[d - nope]);
      for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      if (lane == 0) sc[j] = dot * p.scale;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float mx = st[0];
      for (int32_t j = 0; j < n; ++j) mx = fmaxf(mx, sc[j]);
      const float r = expf(st[0] - mx);
      float sum = 0.f;
      for (int32_t j = 0; j < n; ++j) {
        sc[j] = expf(sc[j] - mx);
        sum += sc[j];
      }
      st[1] = st[1] * r + sum;
      st[0] = mx;
      st[2] = r;
    }
    __syncthreads();
    const float r = st[2];
#pragma unroll
    for (int k = 0; k < kMaxDims; ++k) {
      const int32_t d = threadIdx.x + kThreads * k;
      if (d >= vd) break;
      float a = acc[k] * r;
      for (int32_t j = 0; j < n; ++j) a += sc[j] * p.v[((start + j) * static_cast<int64_t>(H) + h) * vd + d];
      acc[k] = a;
    }
    __syncthreads();
  }
  const float inv = p.last_tile ? 1.f / st[1] : 1.f;
#pragma unroll
  for (int k = 0; k < kMaxDims; ++k) {
    const int32_t d = threadIdx.x + kThreads * k;
    if (d < vd) out[d] = acc[k] * inv;
  }
  if (threadIdx.x == 0) {
    state[0] = st[0];
    state[1] = st[1];
  }
}

}  // namespace

static void ExpandedLatentAttention(const ExpandedLatentAttentionParams& p, cudaStream_t stream) {
  if (p.seq.num_tokens <= 0 || p.num_heads <= 0) return;
  LS_CUDA_REQUIRE(p.v_dim <= kMaxDims * kThreads, "ExpandedLatentAttention: v_dim above 1024");
  const size_t smem = (static_cast<size_t>(p.nope_dim + p.rope_dim) + kChunk + 3) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(p.seq.num_tokens), static_cast<unsigned>(p.num_heads));
  ExpandedLatentAttentionKernel<<<grid, kThreads, smem, stream>>>(p);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace ls::cuda

// CudaBackend::ExpandedLatentAttention: the op on the backend's stream.
namespace ls {

void CudaBackend::ExpandedLatentAttention(const ExpandedLatentAttentionParams& p) {
  Activate();
  cuda::ExpandedLatentAttention(p, stream_);
}

}  // namespace ls
