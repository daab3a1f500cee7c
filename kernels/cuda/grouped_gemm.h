// Grouped GEMMs of the routed experts (grouped_gemm.cu): rows of a BF16 matrix grouped by expert
// (expert e owns rows offsets[e] .. offsets[e] + counts[e]), each group multiplied by its own
// expert's row-major weights on the tensor cores (mma.sync m16n8k16, BF16 operands, FP32
// accumulation). The grid covers every row tile of every expert without the host knowing the
// counts: tile offsets (ceil(count / kGroupedGemmTileRows) per expert, prefix-summed) are device
// memory.
//
// Weights are BF16 values or stay in their quantized form (ExpertWeight): MXFP4 (E2M1 codes, E8M0
// scales), INT4 (U4 codes, F32/BF16/F16 scales, optional U8 zero points) or FP8 e4m3 (F32/BF16/F16
// block scales). The load stage reads the codes and scales of each 8-element chunk and widens
// every weight to BF16 before it goes to shared memory: w = (code − zero) · scale computed in
// float32 (one rounding, the product; exact whenever it is representable, e.g. every E2M1 code
// times a power-of-two E8M0 scale in float32's range), then rounded to nearest-even BF16 once —
// exactly the BF16 that dequantizing the weight at load (F32ToBf16(WeightValue(w, n, k)),
// kernels/quantized_weight.h) gives. MXFP4 and FP8 codes times power-of-two scales are exact in
// BF16 too; INT4 and FP8 with other scales have the float32 product rounded to BF16 that once.
// Since shared memory then holds the same BF16 operands and the MMA part is the same, a GEMM over
// packed weights equals, bit for bit, the GEMM over their load-time BF16 dequantization.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

typedef struct CUstream_st* cudaStream_t;

namespace ls::cuda {

inline constexpr int32_t kGroupedGemmTileRows = 64;

// Where each expert's rows are; device memory except the sizes.
struct ExpertRows {
  const int32_t* counts = nullptr;        // [N] rows of each expert
  const int32_t* offsets = nullptr;       // [N + 1] first row of each expert
  const int32_t* tile_offsets = nullptr;  // [N + 1] first row tile of each expert
  int32_t num_experts = 0;
  int64_t num_rows = 0;  // Σ counts, known to the host (T · K)
};

// One expert's weight matrix [n, k], row-major in device memory, as the grouped GEMMs read it.
// Quantized (ExpertMatrices::codes not BF16): element (r, c) is (code − zero) · scale of block
// (r / block_rows, c / block_cols) of the scale grid [ceil(n / block_rows), ceil(k / block_cols)];
// 4-bit codes two a byte, the even column in the low nibble (kernels/dtype.h); k even for them.
struct ExpertWeight {
  const void* data = nullptr;       // BF16 values or the codes; null: an empty slot, never routed to
  const void* scale = nullptr;      // the scale grid (quantized only)
  const uint8_t* zero = nullptr;    // U4 zero points on the scale grid; null: 8 (U4), 0 (others)
  DType scale_dtype = DType::kF32;  // F32, BF16, F16 or E8M0
  int32_t block_rows = 1;           // ≥ 1
  int32_t block_cols = 1;           // ≥ 1
};

// One matrix (gate, up or down) of every expert: a device array of descriptions and their
// format, the same for every expert.
struct ExpertMatrices {
  const ExpertWeight* experts = nullptr;  // [N], device memory
  DType codes = DType::kBF16;             // kBF16 (values), kE2M1, kU4 or kF8E4M3
};

// Whether the grouped GEMMs read weights of this code type in their quantized form.
inline bool GroupedGemmReadsCodes(DType codes) {
  return codes == DType::kBF16 || codes == DType::kE2M1 || codes == DType::kU4 || codes == DType::kF8E4M3;
}

// act[r, :] = act(a[r] · gate_eᵀ) · (a[r] · up_eᵀ) as BF16 for each row r of expert e; gate and up
// share one format.                 a: [rows, k]  gate_e, up_e: [n, k]  out: [rows, n]
void GroupedGemmGlu(const uint16_t* a, const ExpertMatrices& gate, const ExpertMatrices& up, int64_t n, int64_t k,
                    const ExpertRows& rows, GluAct act, uint16_t* out, cudaStream_t stream);

// y[r, :] = a[r] · w_eᵀ in float32 for each row r of expert e.
//                                  a: [rows, k]  w_e: [n, k]  out: [rows, n]
void GroupedGemm(const uint16_t* a, const ExpertMatrices& w, int64_t n, int64_t k, const ExpertRows& rows, float* out,
                 cudaStream_t stream);

// FP8 tensor-core variants, for experts whose three matrices are all F8_E4M3 with 128 × 128 block
// scales (any scale type) and n, k multiples of 16: a is e4m3 [rows, k] with one float32 scale per
// row and 128 columns, a_scales [rows][ceil(k / 128)] (RoundBf16RowsToFp8, fp8_blocks.h). Each
// 128-wide k block is multiplied on the FP8 tensor cores (mma.sync m16n8k32) into its own FP32
// sums, which are added to the output times the row's and the weight block's scales, in k order.
void GroupedGemmGluFp8(const uint8_t* a, const float* a_scales, const ExpertMatrices& gate, const ExpertMatrices& up,
                       int64_t n, int64_t k, const ExpertRows& rows, GluAct act, uint16_t* out, cudaStream_t stream);
void GroupedGemmFp8(const uint8_t* a, const float* a_scales, const ExpertMatrices& w, int64_t n, int64_t k,
                    const ExpertRows& rows, float* out, cudaStream_t stream);

// Whether the grouped GEMMs read this quantized weight as it is (its codes and scales), so that
// PrepareWeight keeps it so: E2M1 + E8M0, U4 + float scales, F8_E4M3 + float scales, row-major.
bool GroupedGemmReads(const Tensor& w);

}  // namespace ls::cuda
