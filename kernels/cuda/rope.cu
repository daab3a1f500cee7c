// CUDA rotary position embedding, rotate-half convention over the whole head: pairs (i, i + hd/2)
// rotate by pos · inv_freq[i]. One block per token. Twin of kernels/cpu/rope.cc: the frequencies
// come from the same host formula and the products are not fused, so the angles are identical.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace ls::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void RopeKernel(float* __restrict__ x, int32_t num_heads, int32_t head_dim,
                           const int32_t* __restrict__ positions, const float* __restrict__ inv_freq) {
  const int32_t half = head_dim / 2;
  const float pos = static_cast<float>(positions[blockIdx.x]);
  float* xt = x + static_cast<int64_t>(blockIdx.x) * num_heads * head_dim;
  for (int32_t j = threadIdx.x; j < num_heads * half; j += kThreads) {
    const int32_t h = j / half, i = j % half;
    const float angle = __fmul_rn(pos, inv_freq[i]);
    const float c = cosf(angle), s = sinf(angle);
    float* v = xt + h * head_dim;
    const float a = v[i], b = v[i + half];
    v[i] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    v[i + half] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  }
}

}  // namespace

void RopeInverseFrequencies(float theta, int32_t head_dim, float* inv_freq) {
  for (int32_t i = 0; i < head_dim / 2; ++i) {
    inv_freq[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  }
}

void Rope(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const int32_t* positions,
          const float* inv_freq, cudaStream_t stream) {
  if (num_tokens == 0 || head_dim < 2) return;
  RopeKernel<<<static_cast<unsigned>(num_tokens), kThreads, 0, stream>>>(x, num_heads, head_dim, positions, inv_freq);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace ls::cuda
