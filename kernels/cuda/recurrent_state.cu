// CUDA ops of the recurrent (linear-attention) layers, twins of kernels/cpu/short_conv.cc and
// kernels/cpu/kda.cc: the short causal convolution with SiLU continuing from each sequence's state
// slot, and Kimi Delta Attention in its recurrent form, one block per (sequence, head) with the
// head's [d, d] state in shared memory and a thread per value column.
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

// Grid: (new tokens, channel blocks of kThreads).
__global__ void ShortConvKernel(const float* __restrict__ in, float* __restrict__ out, int64_t C,
                                const void* __restrict__ weight, DType wdtype, int32_t K,
                                const float* __restrict__ state, int64_t state_floats, int64_t tail_offset,
                                const RecurrentToken* __restrict__ tokens) {
  const RecurrentToken tok = tokens[blockIdx.x];
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  if (c >= C) return;
  const float* tail = state + static_cast<int64_t>(tok.slot) * state_floats + tail_offset;
  const int32_t hist = K - 1;
  float acc = 0.f;
  for (int32_t j = 0; j < K; ++j) {
    const int32_t m = tok.index - hist + j;  // the input's index among the sequence's new tokens
    const float u = m >= 0 ? in[(static_cast<int64_t>(tok.first_row) + m) * C + c]
                           : (tok.fresh ? 0.f : tail[(hist + m) * C + c]);
    acc += LoadWeight(weight, wdtype, c * K + j) * u;
  }
  out[static_cast<int64_t>(tok.first_row + tok.index) * C + c] = acc * Sigmoid(acc);
}

// Grid: (sequences, channel blocks): the slot's inputs move on to the step's last K − 1.
__global__ void ShortConvTailKernel(const float* __restrict__ in, int64_t C, int32_t K, float* __restrict__ state,
                                    int64_t state_floats, int64_t tail_offset, const RecurrentSeq* __restrict__ seqs) {
  const RecurrentSeq s = seqs[blockIdx.x];
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  if (c >= C) return;
  float* tail = state + static_cast<int64_t>(s.slot) * state_floats + tail_offset;
  const int32_t hist = K - 1;
  float last[16];
  for (int32_t j = 0; j < hist; ++j) {
    const int32_t m = s.num_tokens - hist + j;
    last[j] = m >= 0 ? in[(static_cast<int64_t>(s.first_row) + m) * C + c] : (s.fresh ? 0.f : tail[(hist + m) * C + c]);
  }
  for (int32_t j = 0; j < hist; ++j) tail[j * C + c] = last[j];
}

// Grid: (sequences, heads); blockDim = d (≤ 1024). Dynamic shared memory: S [d, d] | q | k | g | reduce.
__global__ void KdaKernel(KdaParams p, const RecurrentSeq* __restrict__ seqs) {
  extern __shared__ float smem[];
  const int32_t d = p.head_dim, H = p.num_heads, h = blockIdx.y, j = threadIdx.x;
  float* S = smem;
  float* qs = S + d * d;
  float* ks = qs + d;
  float* gs = ks + d;
  float* red = gs + d;  // [2] sums of squares
  const RecurrentSeq s = seqs[blockIdx.x];
  float* state = p.cache.state + static_cast<int64_t>(s.slot) * p.cache.state_floats + static_cast<int64_t>(h) * d * d;
  for (int32_t i = 0; i < d; ++i) S[i * d + j] = s.fresh ? 0.f : state[i * d + j];
  const float a = expf(LoadWeight(p.a_log.data, p.a_log.dtype, h));
  const float dtb = LoadWeight(p.dt_bias.data, p.dt_bias.dtype, static_cast<int64_t>(h) * d + j);
  const float qscale = rsqrtf(static_cast<float>(d));
  for (int32_t t = 0; t < s.num_tokens; ++t) {
    const int64_t row = (static_cast<int64_t>(s.first_row) + t) * H + h;
    const float q = p.q[row * d + j], k = p.k[row * d + j], v = p.v[row * d + j];
    if (j == 0) red[0] = red[1] = 0.f;
    __syncthreads();
    atomicAdd(&red[0], q * q);
    atomicAdd(&red[1], k * k);
    const float graw = p.graw[row * d + j] + dtb;
    gs[j] = p.gate == KdaGate::kSoftplus ? -a * (graw > 20.f ? graw : log1pf(expf(graw)))
                                         : p.lower_bound * Sigmoid(a * graw);
    __syncthreads();
    qs[j] = q * qscale / sqrtf(red[0] + 1e-6f);
    ks[j] = k / sqrtf(red[1] + 1e-6f);
    const float beta = Sigmoid(p.beta[row]);
    __syncthreads();
    float u = 0.f;
    for (int32_t i = 0; i < d; ++i) {
      const float sij = S[i * d + j] * expf(gs[i]);
      S[i * d + j] = sij;
      u += ks[i] * sij;
    }
    const float delta = beta * (v - u);
    float o = 0.f;
    for (int32_t i = 0; i < d; ++i) {
      const float sij = S[i * d + j] + ks[i] * delta;
      S[i * d + j] = sij;
      o += qs[i] * sij;
    }
    p.out[row * d + j] = o;
    __syncthreads();
  }
  for (int32_t i = 0; i < d; ++i) state[i * d + j] = S[i * d + j];
}

}  // namespace

static void ShortConv(const ShortConvParams& p, const RecurrentToken* tokens, int32_t num_tokens,
                      const RecurrentSeq* seqs, cudaStream_t stream) {
  if (num_tokens == 0 || p.channels == 0) return;
  LS_CUDA_REQUIRE(p.kernel >= 1 && p.kernel <= 16, "ShortConv: kernel size must be within [1, 16]");
  const unsigned blocks = static_cast<unsigned>((p.channels + kThreads - 1) / kThreads);
  ShortConvKernel<<<dim3(static_cast<unsigned>(num_tokens), blocks), kThreads, 0, stream>>>(
      p.in, p.out, p.channels, p.weight->data, p.weight->dtype, p.kernel, p.cache.state, p.cache.state_floats,
      p.tail_offset, tokens);
  LS_CUDA_CHECK_LAUNCH();
  ShortConvTailKernel<<<dim3(static_cast<unsigned>(p.num_seqs), blocks), kThreads, 0, stream>>>(
      p.in, p.channels, p.kernel, p.cache.state, p.cache.state_floats, p.tail_offset, seqs);
  LS_CUDA_CHECK_LAUNCH();
}

static void KdaAttention(const KdaParams& p, const RecurrentSeq* seqs, cudaStream_t stream) {
  if (p.num_seqs == 0) return;
  LS_CUDA_REQUIRE(p.head_dim >= 1 && p.head_dim <= 1024, "KdaAttention: head_dim must be within [1, 1024]");
  const size_t smem = (static_cast<size_t>(p.head_dim) * p.head_dim + 3 * p.head_dim + 2) * sizeof(float);
  if (smem > 48 * 1024)
    LS_CUDA_CHECK(cudaFuncSetAttribute(KdaKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  KdaKernel<<<dim3(static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(p.num_heads)),
              static_cast<unsigned>(p.head_dim), smem, stream>>>(p, seqs);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace ls::cuda

// CudaBackend::ShortConv, KdaAttention: the op on the backend's stream.
namespace ls {

void CudaBackend::ShortConv(const ShortConvParams& p) {
  Activate();
  cuda::FlattenRecurrentSeqs(p.seqs, p.num_seqs, &recurrent_seqs_, &recurrent_tokens_);
  if (recurrent_tokens_.empty()) return;
  const auto* d_seqs = uploader_->Upload(recurrent_seqs_.data(), recurrent_seqs_.size());
  const auto* d_tokens = uploader_->Upload(recurrent_tokens_.data(), recurrent_tokens_.size());
  cuda::ShortConv(p, d_tokens, static_cast<int32_t>(recurrent_tokens_.size()), d_seqs, stream_);
}

void CudaBackend::KdaAttention(const KdaParams& p) {
  Activate();
  cuda::FlattenRecurrentSeqs(p.seqs, p.num_seqs, &recurrent_seqs_, &recurrent_tokens_);
  if (recurrent_seqs_.empty()) return;
  const auto* d_seqs = uploader_->Upload(recurrent_seqs_.data(), recurrent_seqs_.size());
  cuda::KdaAttention(p, d_seqs, stream_);
}

}  // namespace ls
