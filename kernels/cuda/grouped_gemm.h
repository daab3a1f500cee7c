// Grouped GEMMs of the routed experts (grouped_gemm.cu): rows of a BF16 matrix grouped by expert
// (expert e owns rows offsets[e] .. offsets[e] + counts[e]), each group multiplied by its own
// expert's BF16 row-major weights on the tensor cores (mma.sync m16n8k16, FP32 accumulation).
// The grid covers every row tile of every expert without the host knowing the counts: tile
// offsets (ceil(count / kGroupedGemmTileRows) per expert, prefix-summed) are device memory.
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

// act[r, :] = act(a[r] · gate_eᵀ) · (a[r] · up_eᵀ) as BF16 for each row r of expert e.
//                                  a: [rows, k]  gate_e, up_e: [n, k]  out: [rows, n]
void GroupedGemmGlu(const uint16_t* a, const uint16_t* const* gate, const uint16_t* const* up, int64_t n, int64_t k,
                    const ExpertRows& rows, GluAct act, uint16_t* out, cudaStream_t stream);

// y[r, :] = a[r] · w_eᵀ in float32 for each row r of expert e.
//                                  a: [rows, k]  w_e: [n, k]  out: [rows, n]
void GroupedGemm(const uint16_t* a, const uint16_t* const* w, int64_t n, int64_t k, const ExpertRows& rows, float* out,
                 cudaStream_t stream);

}  // namespace ls::cuda
