// CUDA latent attention (MLA, absorbed form; LatentAttentionParams) over a latent cache
// [num_blocks, block_size, latent_dim + rope_dim] of float32 or BF16 values (read as float32; new
// rows rounded to nearest even when stored): first the step's new rows [c | k_rope] go into
// their slots, then one block per (new token, head) runs a causal online softmax over the
// sequence's cached rows in tiles of kTile positions — a warp per position for the scores, lanes
// across the row — and accumulates Σ p · c with threads across the latent dims. Twin of
// kernels/cpu/latent_attention.cc. Also the expanded form's row moves: the store alone, and cached
// rows of one sequence copied out.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/host_uploader.h"

namespace ls::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 32;

__device__ inline int64_t RowOffset(const int32_t* table, int32_t pos, int32_t block_size, int32_t width) {
  return (static_cast<int64_t>(table[pos / block_size]) * block_size + pos % block_size) * width;
}

// Grid: one block per new token. T: the cache's element type (float or __nv_bfloat16), here and below.
template <typename T>
__global__ void WriteLatentKernel(const float* __restrict__ c_new, const float* __restrict__ k_rope_new,
                                  const AttentionToken* __restrict__ tokens, const int32_t* __restrict__ tables,
                                  int32_t L, int32_t R, int32_t block_size, T* __restrict__ cache) {
  const AttentionToken tok = tokens[blockIdx.x];
  T* row = cache + RowOffset(tables + tok.table, tok.pos, block_size, L + R);
  for (int32_t j = threadIdx.x; j < L + R; j += kThreads)
    row[j] = FromF32<T>(j < L ? c_new[static_cast<int64_t>(tok.row) * L + j]
                              : k_rope_new[static_cast<int64_t>(tok.row) * R + j - L]);
}

// Grid: one block per row copied.
template <typename T>
__global__ void LoadLatentKernel(const T* __restrict__ cache, const int32_t* __restrict__ table, int32_t first,
                                 int32_t width, int32_t block_size, float* __restrict__ out) {
  const int32_t i = blockIdx.x;
  const T* row = cache + RowOffset(table, first + i, block_size, width);
  for (int32_t j = threadIdx.x; j < width; j += kThreads) out[static_cast<int64_t>(i) * width + j] = ToF32(row[j]);
}

// Grid: (new tokens, heads). Dynamic shared memory: q [L + R] | scores [kTile] | max, sum, rescale.
template <typename T>
__global__ void LatentAttentionKernel(const float* __restrict__ q_latent, const float* __restrict__ q_rope,
                                      int64_t q_rope_stride, const T* __restrict__ cache,
                                      const AttentionToken* __restrict__ tokens, const int32_t* __restrict__ tables,
                                      int32_t H, int32_t L, int32_t R, int32_t block_size, float scale,
                                      float* __restrict__ out) {
  extern __shared__ float smem[];
  const int32_t W = L + R;
  float* sq = smem;
  float* sc = sq + W;
  float* state = sc + kTile;  // running max, running sum, rescale
  const AttentionToken tok = tokens[blockIdx.x];
  const int32_t h = blockIdx.y;
  const int64_t qh = static_cast<int64_t>(tok.row) * H + h;
  for (int32_t j = threadIdx.x; j < W; j += kThreads)
    sq[j] = j < L ? q_latent[qh * L + j] : q_rope[qh * q_rope_stride + j - L];
  if (threadIdx.x == 0) {
    state[0] = -INFINITY;
    state[1] = 0.f;
  }
  __syncthreads();
  // Each thread owns latent dims d = threadIdx.x + kThreads·i.
  constexpr int kMaxDims = 8;  // L up to 1024
  float acc[kMaxDims];
#pragma unroll
  for (int i = 0; i < kMaxDims; ++i) acc[i] = 0.f;
  const int32_t* table = tables + tok.table;
  const int32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t ctx = tok.pos + 1;
  for (int32_t start = 0; start < ctx; start += kTile) {
    const int32_t n = min(kTile, ctx - start);
    for (int32_t j = warp; j < n; j += kWarps) {
      const T* row = cache + RowOffset(table, start + j, block_size, W);
      float dot = 0.f;
      for (int32_t d = lane; d < W; d += 32) dot += sq[d] * ToF32(row[d]);
      for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      if (lane == 0) sc[j] = dot * scale;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float mx = state[0];
      for (int32_t j = 0; j < n; ++j) mx = fmaxf(mx, sc[j]);
      const float r = expf(state[0] - mx);
      float sum = 0.f;
      for (int32_t j = 0; j < n; ++j) {
        sc[j] = expf(sc[j] - mx);
        sum += sc[j];
      }
      state[1] = state[1] * r + sum;
      state[0] = mx;
      state[2] = r;
    }
    __syncthreads();
    const float r = state[2];
#pragma unroll
    for (int i = 0; i < kMaxDims; ++i) {
      const int32_t d = threadIdx.x + kThreads * i;
      if (d >= L) break;
      float a = acc[i] * r;
      for (int32_t j = 0; j < n; ++j) a += sc[j] * ToF32(cache[RowOffset(table, start + j, block_size, W) + d]);
      acc[i] = a;
    }
    __syncthreads();
  }
  const float inv = 1.f / state[1];
#pragma unroll
  for (int i = 0; i < kMaxDims; ++i) {
    const int32_t d = threadIdx.x + kThreads * i;
    if (d < L) out[qh * L + d] = acc[i] * inv;
  }
}

}  // namespace

namespace {

// Whether a latent cache holds BF16 (else float32); `error` names the op and says what it keeps.
bool KeepsBf16(DType dtype, const char* error) {
  LS_CUDA_REQUIRE(dtype == DType::kF32 || dtype == DType::kBF16, error);
  return dtype == DType::kBF16;
}

template <typename T>
void WriteLatentRows(const LatentAttentionParams& p, const AttentionToken* tokens, int32_t num_tokens,
                     const int32_t* block_tables, cudaStream_t stream) {
  WriteLatentKernel<T><<<static_cast<unsigned>(num_tokens), kThreads, 0, stream>>>(
      p.c_new, p.k_rope_new, tokens, block_tables, p.latent_dim, p.rope_dim, p.cache.block_size,
      static_cast<T*>(p.cache.k));
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void LatentAttention(const LatentAttentionParams& p, const AttentionToken* tokens, int32_t num_tokens,
                     const int32_t* block_tables, cudaStream_t stream) {
  WriteLatentRows<T>(p, tokens, num_tokens, block_tables, stream);
  const size_t smem = (static_cast<size_t>(p.latent_dim + p.rope_dim) + kTile + 3) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(num_tokens), static_cast<unsigned>(p.num_heads));
  LatentAttentionKernel<T><<<grid, kThreads, smem, stream>>>(
      p.q_latent, p.q_rope, p.q_rope_stride, static_cast<const T*>(p.cache.k), tokens, block_tables, p.num_heads,
      p.latent_dim, p.rope_dim, p.cache.block_size, p.scale, p.out);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace

static void StoreLatentRows(const LatentAttentionParams& p, const AttentionToken* tokens, int32_t num_tokens,
                            const int32_t* block_tables, cudaStream_t stream) {
  if (num_tokens == 0) return;
  if (KeepsBf16(p.cache.dtype, "StoreLatentRows: the CUDA kernels keep a float32 or BF16 latent cache")) {
    WriteLatentRows<__nv_bfloat16>(p, tokens, num_tokens, block_tables, stream);
  } else {
    WriteLatentRows<float>(p, tokens, num_tokens, block_tables, stream);
  }
}

static void LoadLatentRows(const KvLayer& cache, int32_t width, const int32_t* block_table, int32_t first,
                           int32_t count, float* out, cudaStream_t stream) {
  if (count <= 0) return;
  if (KeepsBf16(cache.dtype, "LoadLatentRows: the CUDA kernels keep a float32 or BF16 latent cache")) {
    LoadLatentKernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(cache.k), block_table, first, width, cache.block_size, out);
  } else {
    LoadLatentKernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(
        static_cast<const float*>(cache.k), block_table, first, width, cache.block_size, out);
  }
  LS_CUDA_CHECK_LAUNCH();
}

static void PagedLatentAttention(const LatentAttentionParams& p, const AttentionToken* tokens, int32_t num_tokens,
                                 const int32_t* block_tables, cudaStream_t stream) {
  if (num_tokens == 0) return;
  LS_CUDA_REQUIRE(p.latent_dim <= 8 * kThreads, "PagedLatentAttention: latent_dim above 1024");
  if (KeepsBf16(p.cache.dtype, "PagedLatentAttention: the CUDA kernels keep a float32 or BF16 latent cache")) {
    LatentAttention<__nv_bfloat16>(p, tokens, num_tokens, block_tables, stream);
  } else {
    LatentAttention<float>(p, tokens, num_tokens, block_tables, stream);
  }
}

}  // namespace ls::cuda

// CudaBackend::PagedLatentAttention, StoreLatentRows, LoadLatentRows: the op on the backend's stream.
namespace ls {

void CudaBackend::PagedLatentAttention(const LatentAttentionParams& p) {
  Activate();
  const UploadedSeqs u = UploadAttentionSeqs(p);
  if (u.num_tokens == 0) return;
  cuda::PagedLatentAttention(p, u.tokens, u.num_tokens, u.tables, stream_);
}

void CudaBackend::StoreLatentRows(const LatentAttentionParams& p) {
  Activate();
  const UploadedSeqs u = UploadAttentionSeqs(p);
  if (u.num_tokens == 0) return;
  cuda::StoreLatentRows(p, u.tokens, u.num_tokens, u.tables, stream_);
}

void CudaBackend::LoadLatentRows(const KvLayer& cache, int32_t width, const AttentionSeq& seq, int32_t first,
                                 int32_t count, float* out) {
  if (count <= 0) return;
  Activate();
  const int32_t blocks = (first + count + cache.block_size - 1) / cache.block_size;
  LS_CUDA_REQUIRE(blocks <= seq.num_blocks, "LoadLatentRows: rows past the sequence's block table");
  const int32_t* d_table = uploader_->Upload(seq.block_table, static_cast<size_t>(blocks));
  cuda::LoadLatentRows(cache, width, d_table, first, count, out, stream_);
}

}  // namespace ls
