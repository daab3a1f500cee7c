// MoeScratch: the intermediates of the routed-expert op (moe.cu), kept between calls so that
// their device memory is reused. MoePermute fills the views; MoeGroupedGemms and MoeCombine read
// them. One per stream; not thread-safe.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_scratch.h"

namespace ls::cuda {

struct MoeScratch {
  // Views valid after MoePermute until the next call (device memory; R = T · K routed pairs).
  int32_t* counts = nullptr;        // [N] rows routed to each expert
  int32_t* offsets = nullptr;       // [N + 1] first permuted row of each expert
  int32_t* tile_offsets = nullptr;  // [N + 1] first grouped-GEMM row tile of each expert
  int32_t* slot_of = nullptr;       // [R] permuted row of pair (t, k), pair index t · K + k
  uint16_t* z = nullptr;            // [R, in_width] permuted expert inputs, BF16
  uint16_t* act = nullptr;          // [R, width] GLU outputs, BF16 (MoeGroupedGemms)
  float* y = nullptr;               // [R, out_width] expert outputs (MoeGroupedGemms)
  // FP8 experts: z and act rounded to e4m3, with a float32 scale per row and 128 columns.
  uint8_t* z8 = nullptr;
  float* z8_scales = nullptr;
  uint8_t* act8 = nullptr;
  float* act8_scales = nullptr;

  // Backing memory.
  DeviceScratch counts_mem, offsets_mem, tile_offsets_mem, slot_of_mem, z_mem, act_mem, y_mem;
  DeviceScratch z8_mem, z8_scales_mem, act8_mem, act8_scales_mem;
  DeviceScratch pair_index_mem, sorted_ids_mem, sorted_pairs_mem, sort_temp_mem;
};

}  // namespace ls::cuda
