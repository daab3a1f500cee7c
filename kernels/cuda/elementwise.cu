// Small elementwise CUDA ops: the residual add (x += y), row biases, sigmoid gating, and the
// float32 → BF16 conversion that turns activations into GEMM operands.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"

namespace ls::cuda {
namespace {

constexpr int kThreads = 256;

unsigned GridFor(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536)); }

__global__ void AddKernel(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    x[i] += y[i];
  }
}

__global__ void AddBiasKernel(float* __restrict__ y, int64_t n, int64_t width, const void* __restrict__ bias,
                              DType dtype) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    y[i] += LoadWeight(bias, dtype, i % width);
  }
}

__global__ void MulSigmoidKernel(float* __restrict__ x, int64_t n, int64_t width, const float* __restrict__ gate,
                                 int64_t gate_width) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t r = i / width;
    x[i] *= Sigmoid(gate[r * gate_width + (gate_width == 1 ? 0 : i % width)]);
  }
}

// Grid: one block per token. Dynamic shared memory: the n sources' scores.
__global__ void AttnResKernel(AttnResParams p) {
  extern __shared__ float s[];
  __shared__ float part[2][kThreads];
  const int64_t t = blockIdx.x, d = p.width, T = p.num_tokens;
  const int32_t n = p.num_blocks + 1;
  for (int32_t i = 0; i < n; ++i) {
    const float* v = (i < p.num_blocks ? p.blocks + i * T * d : p.last) + t * d;
    float ss = 0.f, dot = 0.f;
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      const float w = LoadWeight(p.norm_weight.data, p.norm_weight.dtype, j) *
                      LoadWeight(p.proj_weight.data, p.proj_weight.dtype, j);
      ss += v[j] * v[j];
      dot += v[j] * w;
    }
    part[0][threadIdx.x] = ss;
    part[1][threadIdx.x] = dot;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      if (threadIdx.x < stride) {
        part[0][threadIdx.x] += part[0][threadIdx.x + stride];
        part[1][threadIdx.x] += part[1][threadIdx.x + stride];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) s[i] = part[1][0] / sqrtf(part[0][0] / static_cast<float>(d) + p.eps);
    __syncthreads();
  }
  float mx = -INFINITY;
  for (int32_t i = 0; i < n; ++i) mx = fmaxf(mx, s[i]);
  float sum = 0.f;
  for (int32_t i = 0; i < n; ++i) sum += expf(s[i] - mx);
  for (int64_t j = threadIdx.x; j < d; j += kThreads) {
    float acc = 0.f;
    for (int32_t i = 0; i < n; ++i)
      acc += expf(s[i] - mx) / sum * (i < p.num_blocks ? p.blocks + i * T * d : p.last)[t * d + j];
    p.out[t * d + j] = acc;
  }
}

__global__ void ToBf16Kernel(const float* __restrict__ x, int64_t n, __nv_bfloat16* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    out[i] = __float2bfloat16_rn(x[i]);
  }
}

}  // namespace

static void Add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  AddKernel<<<GridFor(n), kThreads, 0, stream>>>(x, y, n);
  LS_CUDA_CHECK_LAUNCH();
}

static void AddBias(float* y, int64_t rows, const Tensor& bias, cudaStream_t stream) {
  const int64_t n = rows * bias.cols;
  if (n == 0) return;
  AddBiasKernel<<<GridFor(n), kThreads, 0, stream>>>(y, n, bias.cols, bias.data, bias.dtype);
  LS_CUDA_CHECK_LAUNCH();
}

static void MulSigmoid(float* x, int64_t rows, int64_t width, const float* gate, int64_t gate_width,
                       cudaStream_t stream) {
  const int64_t n = rows * width;
  if (n == 0) return;
  MulSigmoidKernel<<<GridFor(n), kThreads, 0, stream>>>(x, n, width, gate, gate_width);
  LS_CUDA_CHECK_LAUNCH();
}

static void AttnResMix(const AttnResParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0) return;
  AttnResKernel<<<static_cast<unsigned>(p.num_tokens), kThreads, (p.num_blocks + 1) * sizeof(float), stream>>>(p);
  LS_CUDA_CHECK_LAUNCH();
}

void ConvertToBf16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream) {
  if (n == 0) return;
  ToBf16Kernel<<<GridFor(n), kThreads, 0, stream>>>(x, n, reinterpret_cast<__nv_bfloat16*>(out));
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace ls::cuda

// CudaBackend::AddBias, MulSigmoid, Add, Copy, SetZero, AttnResMix: the op on the backend's stream.
namespace ls {

void CudaBackend::AddBias(float* y, int64_t rows, const Tensor& bias) {
  Activate();
  cuda::AddBias(y, rows, bias, stream_);
}

void CudaBackend::MulSigmoid(float* x, int64_t rows, int64_t width, const float* gate, int64_t gate_width) {
  Activate();
  cuda::MulSigmoid(x, rows, width, gate, gate_width, stream_);
}

void CudaBackend::Add(float* x, const float* y, int64_t n) {
  Activate();
  cuda::Add(x, y, n, stream_);
}

void CudaBackend::Copy(float* dst, const float* src, int64_t n) {
  if (n <= 0) return;
  Activate();
  LS_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::SetZero(float* x, int64_t n) {
  if (n <= 0) return;
  Activate();
  LS_CUDA_CHECK(cudaMemsetAsync(x, 0, static_cast<size_t>(n) * sizeof(float), stream_));
}

void CudaBackend::AttnResMix(const AttnResParams& p) {
  Activate();
  cuda::AttnResMix(p, stream_);
}

}  // namespace ls
