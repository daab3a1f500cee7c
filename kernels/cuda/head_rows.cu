// Per-head row moves for CudaBackend::HeadGemm: the heads' input rows, read through their token
// and head strides, gathered head-major as BF16 GEMM operands, and the heads' contiguous outputs
// scattered back through the output strides. Grid: (tokens, heads).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm_cublaslt.h"

namespace ls::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void GatherHeadRowsKernel(const float* __restrict__ x, RowStrides xs, int64_t T, int64_t width,
                                     __nv_bfloat16* __restrict__ out) {
  const int64_t t = blockIdx.x, h = blockIdx.y;
  const float* from = x + t * xs.token + h * xs.head;
  __nv_bfloat16* to = out + (h * T + t) * width;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) to[i] = __float2bfloat16_rn(from[i]);
}

__global__ void ScatterHeadRowsKernel(const float* __restrict__ in, int64_t T, int64_t width, float* __restrict__ y,
                                      RowStrides ys) {
  const int64_t t = blockIdx.x, h = blockIdx.y;
  const float* from = in + (h * T + t) * width;
  float* to = y + t * ys.token + h * ys.head;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) to[i] = from[i];
}

}  // namespace

static void GatherHeadRowsBf16(const float* x, RowStrides xs, int64_t T, int32_t heads, int64_t width, uint16_t* out,
                               cudaStream_t stream) {
  if (T == 0 || heads == 0) return;
  LS_CUDA_REQUIRE(T <= 2147483647, "GatherHeadRowsBf16: too many tokens");
  GatherHeadRowsKernel<<<dim3(static_cast<unsigned>(T), static_cast<unsigned>(heads)), kThreads, 0, stream>>>(
      x, xs, T, width, reinterpret_cast<__nv_bfloat16*>(out));
  LS_CUDA_CHECK_LAUNCH();
}

static void ScatterHeadRows(const float* in, int64_t T, int32_t heads, int64_t width, float* y, RowStrides ys,
                            cudaStream_t stream) {
  if (T == 0 || heads == 0) return;
  ScatterHeadRowsKernel<<<dim3(static_cast<unsigned>(T), static_cast<unsigned>(heads)), kThreads, 0, stream>>>(
      in, T, width, y, ys);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace ls::cuda

// CudaBackend::HeadGemm: the op on the backend's stream.
namespace ls {

void CudaBackend::HeadGemm(const float* x, RowStrides xs, int64_t num_tokens, int32_t heads, const Tensor* w, float* y,
                           RowStrides ys) {
  if (num_tokens == 0 || heads == 0) return;
  Activate();
  // The heads' rows gathered head-major in BF16, one cuBLASLt GEMM per head, the results scattered.
  const int64_t K = w[0].cols, N = w[0].rows;
  uint16_t* in = head_in_.As<uint16_t>(static_cast<size_t>(heads * num_tokens * K), stream_);
  float* out = head_out_.As<float>(static_cast<size_t>(heads * num_tokens * N), stream_);
  cuda::GatherHeadRowsBf16(x, xs, num_tokens, heads, K, in, stream_);
  for (int32_t h = 0; h < heads; ++h)
    gemm_->RunBf16(in + h * num_tokens * K, num_tokens, w[h], out + h * num_tokens * N, false, stream_);
  cuda::ScatterHeadRows(out, num_tokens, heads, N, y, ys, stream_);
}

}  // namespace ls
