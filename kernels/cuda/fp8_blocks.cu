// FP8 block-scaled GEMM helpers (fp8_blocks.h): the weight-scale layout on the host and the
// activations' per-128-block rounding on the device.
#include "kernels/cuda/fp8_blocks.h"

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/quantized_weight.h"

namespace ls::cuda {

bool Fp8GemmFormat(const Tensor& w) {
  return w.dtype == DType::kF8E4M3 && w.quantized() && w.layout == Layout::kRowMajor && !w.quant.zero &&
         w.quant.block_rows == kFp8Block && w.quant.block_cols == kFp8Block &&
         (w.quant.scale_dtype == DType::kF32 || w.quant.scale_dtype == DType::kBF16 ||
          w.quant.scale_dtype == DType::kF16) &&
         w.rows % 16 == 0 && w.cols % 16 == 0 && w.rows > 0 && w.cols > 0;
}

int64_t Fp8WeightScaleStride(int64_t K) { return ((K + kFp8Block - 1) / kFp8Block + 3) / 4 * 4; }

std::vector<float> Fp8WeightScales(const Tensor& w) {
  const int64_t nb = w.scale_rows(), kb = w.scale_cols(), stride = Fp8WeightScaleStride(w.cols);
  std::vector<float> out(Fp8WeightScaleBytes(w) / sizeof(float), 0.f);
  for (int64_t n = 0; n < nb; ++n)
    for (int64_t k = 0; k < kb; ++k) out[static_cast<size_t>(n * stride + k)] = BlockScale(w, n, k);
  return out;
}

namespace {

constexpr int kThreads = 128;  // one thread per value of a block

__device__ inline float Value(const float* x, int64_t i) { return x[i]; }
__device__ inline float Value(const uint16_t* x, int64_t i) { return __uint_as_float(static_cast<uint32_t>(x[i]) << 16); }

// One block per (row, 128-column block): the block's largest |x| by warp shuffles and shared
// memory, then every value rounded with the block's inverse scale. Scales [K blocks][M] (kRowMajor
// false: cuBLASLt's) or [M][K blocks].
template <typename T, bool kRowMajor>
__global__ void RoundRowsToFp8Kernel(const T* x, int64_t M, int64_t K, uint8_t* codes, float* scales) {
  const int64_t m = blockIdx.x, kb = blockIdx.y, k = kb * kFp8Block + threadIdx.x;
  const float v = k < K ? Value(x, m * K + k) : 0.f;
  float a = fabsf(v);
  if (isnan(a)) a = 0.f;
  for (int offset = 16; offset > 0; offset /= 2) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, offset));
  __shared__ float warp_max[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = a;
  __syncthreads();
  float amax = warp_max[0];
  for (int w = 1; w < kThreads / 32; ++w) amax = fmaxf(amax, warp_max[w]);
  const float inv = amax > 0.f ? __fdiv_rn(448.f, amax) : 0.f;
  if (threadIdx.x == 0) scales[kRowMajor ? m * gridDim.y + kb : kb * M + m] = __fdiv_rn(amax, 448.f);
  if (k < K) {
    codes[m * K + k] =
        static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fmul_rn(v, inv), __NV_SATFINITE, __NV_E4M3));
  }
}

template <typename T, bool kRowMajor>
void Launch(const T* x, int64_t M, int64_t K, uint8_t* codes, float* scales, cudaStream_t stream) {
  if (M == 0 || K == 0) return;
  LS_CUDA_REQUIRE((K + kFp8Block - 1) / kFp8Block <= 65535, "RoundRowsToFp8: row too wide");
  const dim3 grid(static_cast<unsigned>(M), static_cast<unsigned>((K + kFp8Block - 1) / kFp8Block));
  RoundRowsToFp8Kernel<T, kRowMajor><<<grid, kThreads, 0, stream>>>(x, M, K, codes, scales);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void RoundRowsToFp8(const float* x, int64_t M, int64_t K, uint8_t* codes, float* scales, cudaStream_t stream) {
  Launch<float, false>(x, M, K, codes, scales, stream);
}

void RoundBf16RowsToFp8(const uint16_t* x, int64_t M, int64_t K, uint8_t* codes, float* scales, cudaStream_t stream) {
  Launch<uint16_t, true>(x, M, K, codes, scales, stream);
}

}  // namespace ls::cuda
