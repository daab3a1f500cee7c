// FP8 block-scaled dense GEMMs on the CUDA backend (DeepSeek-V3's recipe, as the FP8 checkpoints
// were trained): weights keep their e4m3 codes and one float32 scale per 128 × 128 block;
// activations are rounded per row and 128-column block to e4m3 with one float32 scale each
// (s = amax / 448, code = e4m3(x · 448 / amax), round to nearest even, saturating); cuBLASLt
// multiplies the codes on the FP8 tensor cores and applies both scales per 128-wide k block
// (CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F for the weight, VEC128_32F for the activations;
// Hopper, cuBLASLt 12.9 and later). The scale layouts are cuBLASLt's:
//   weight [ceil(N/128)][round_up(ceil(K/128), 4)] (k blocks contiguous, padded to four),
//   activations [ceil(K/128)][M] (rows contiguous).
// Host functions here build and check those layouts; the rounding kernel is in fp8_blocks.cu.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/tensor.h"

typedef struct CUstream_st* cudaStream_t;

namespace ls::cuda {

inline constexpr int64_t kFp8Block = 128;

// Whether a GEMM weight can run as an FP8 block-scaled GEMM: e4m3 codes with 128 × 128 block
// scales (F32, BF16 or F16) and no zero points, in shapes cuBLASLt's FP8 GEMMs take (N and K
// multiples of 16).
bool Fp8GemmFormat(const Tensor& w);
// Stride between a weight's 128-row blocks in its scale layout: ceil(K/128) rounded up to four.
int64_t Fp8WeightScaleStride(int64_t K);
// w's block scales as float32 in cuBLASLt's weight layout (padding zero), and their bytes.
std::vector<float> Fp8WeightScales(const Tensor& w);
inline size_t Fp8WeightScaleBytes(const Tensor& w) {
  return static_cast<size_t>(w.scale_rows() * Fp8WeightScaleStride(w.cols)) * sizeof(float);
}

// x [M, K] float32 (device) → codes [M, K] e4m3 and scales [ceil(K/128)][M] float32 (device).
void RoundRowsToFp8(const float* x, int64_t M, int64_t K, uint8_t* codes, float* scales, cudaStream_t stream);
// The same from BF16 rows, with the scales [M][ceil(K/128)] (the FP8 grouped GEMMs' layout).
void RoundBf16RowsToFp8(const uint16_t* x, int64_t M, int64_t K, uint8_t* codes, float* scales, cudaStream_t stream);

}  // namespace ls::cuda
