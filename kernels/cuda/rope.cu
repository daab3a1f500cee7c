// CUDA rotary position embedding (RopeParams): rotate-half pairs (i, i + r/2) or interleaved
// pairs (2i, 2i + 1) over the first r = rotary_dim dims of each head, pair i turning by
// pos · inv_freq[i], cos and sin scaled by attention_scaling. One block per token. Twin of
// kernels/cpu/rope.cc: the frequencies are the same host table and the products are not fused,
// so the angles are identical.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/host_uploader.h"

namespace ls::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void RopeKernel(float* __restrict__ x, int32_t num_heads, int32_t head_dim, int32_t rotary_dim,
                           bool interleaved, const int32_t* __restrict__ positions,
                           const float* __restrict__ inv_freq, float scaling) {
  const int32_t half = rotary_dim / 2;
  const int32_t stride = interleaved ? 2 : 1, partner = interleaved ? 1 : half;
  const float pos = static_cast<float>(positions[blockIdx.x]);
  float* xt = x + static_cast<int64_t>(blockIdx.x) * num_heads * head_dim;
  for (int32_t j = threadIdx.x; j < num_heads * half; j += kThreads) {
    const int32_t h = j / half, i = j % half;
    const float angle = __fmul_rn(pos, inv_freq[i]);
    const float c = __fmul_rn(cosf(angle), scaling), s = __fmul_rn(sinf(angle), scaling);
    float* v = xt + h * head_dim + i * stride;
    const float a = v[0], b = v[partner];
    v[0] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    v[partner] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  }
}

}  // namespace

static void Rope(float* x, int64_t num_tokens, const int32_t* positions, const RopeParams& p, const float* inv_freq,
                 cudaStream_t stream) {
  if (num_tokens == 0 || p.rotary_dim < 2) return;
  RopeKernel<<<static_cast<unsigned>(num_tokens), kThreads, 0, stream>>>(
      x, p.num_heads, p.head_dim, p.rotary_dim, p.interleaved, positions, inv_freq, p.attention_scaling);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace ls::cuda

// CudaBackend::Rope: the op on the backend's stream.
namespace ls {

void CudaBackend::Rope(float* x, int64_t num_tokens, const int32_t* positions, const RopeParams& p) {
  if (num_tokens == 0 || p.rotary_dim < 2) return;
  Activate();
  const size_t half = static_cast<size_t>(p.rotary_dim / 2);
  // A model has one or a few frequency tables: each is copied to the device once and kept.
  const float* d_inv_freq = nullptr;
  for (const auto& [host, device] : rope_tables_)
    if (host.size() == half && std::equal(host.begin(), host.end(), p.inv_freq)) d_inv_freq = device;
  if (!d_inv_freq) {
    void* device = nullptr;
    LS_CUDA_CHECK(cudaMalloc(&device, half * sizeof(float)));
    LS_CUDA_CHECK(cudaMemcpy(device, p.inv_freq, half * sizeof(float), cudaMemcpyHostToDevice));
    rope_tables_.emplace_back(std::vector<float>(p.inv_freq, p.inv_freq + half), static_cast<float*>(device));
    d_inv_freq = static_cast<float*>(device);
  }
  const int32_t* d_positions = uploader_->Upload(positions, static_cast<size_t>(num_tokens));
  cuda::Rope(x, num_tokens, d_positions, p, d_inv_freq, stream_);
}

}  // namespace ls
