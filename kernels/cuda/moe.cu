// CUDA routed experts, all on the device with no host synchronisation: count the rows routed to
// each expert, prefix-sum them into row and row-tile offsets, sort the (token, k) pairs by expert
// with a stable radix sort (so a group keeps token order, as the CPU op), gather the permuted
// inputs in BF16, run the two grouped GEMMs (gate and up fused with the GLU, then down), and
// combine each token's K rows in slot order. Twin of kernels/cpu/moe.cc.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/fp8_blocks.h"
#include "kernels/cuda/grouped_gemm.h"
#include "kernels/cuda/moe_scratch.h"

namespace ls::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kScanThreads = 1024;

unsigned GridFor(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536)); }

__global__ void CountKernel(const int32_t* __restrict__ ids, int64_t pairs, int32_t* __restrict__ counts,
                            int32_t* __restrict__ pair_index) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < pairs;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    atomicAdd(&counts[ids[i]], 1);
    pair_index[i] = static_cast<int32_t>(i);
  }
}

// One block: offsets = exclusive prefix sum of counts, tile_offsets = that of the row tiles.
__global__ void OffsetsKernel(const int32_t* __restrict__ counts, int32_t n, int32_t* __restrict__ offsets,
                              int32_t* __restrict__ tile_offsets) {
  using Scan = cub::BlockScan<int32_t, kScanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int32_t carry_rows, carry_tiles;
  if (threadIdx.x == 0) carry_rows = carry_tiles = 0;
  __syncthreads();
  for (int32_t base = 0; base < n; base += kScanThreads) {
    const int32_t e = base + static_cast<int32_t>(threadIdx.x);
    const int32_t c = e < n ? counts[e] : 0;
    const int32_t tiles = (c + kGroupedGemmTileRows - 1) / kGroupedGemmTileRows;
    int32_t row_prefix, tile_prefix, row_total, tile_total;
    Scan(tmp).ExclusiveSum(c, row_prefix, row_total);
    __syncthreads();
    Scan(tmp).ExclusiveSum(tiles, tile_prefix, tile_total);
    if (e < n) {
      offsets[e] = carry_rows + row_prefix;
      tile_offsets[e] = carry_tiles + tile_prefix;
    }
    __syncthreads();  // every thread has read the carries
    if (threadIdx.x == 0) {
      carry_rows += row_total;
      carry_tiles += tile_total;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    offsets[n] = carry_rows;
    tile_offsets[n] = carry_tiles;
  }
}

// One block per permuted row (slot): records the slot of its pair and gathers the token's input
// row, converted to BF16.
__global__ void GatherKernel(const float* __restrict__ z, const int32_t* __restrict__ sorted_pairs, int32_t top_k,
                             int64_t width, int32_t* __restrict__ slot_of, __nv_bfloat16* __restrict__ zp) {
  const int64_t slot = blockIdx.x;
  const int32_t pair = sorted_pairs[slot];
  if (threadIdx.x == 0) slot_of[pair] = static_cast<int32_t>(slot);
  const float* src = z + static_cast<int64_t>(pair / top_k) * width;
  __nv_bfloat16* dst = zp + slot * width;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) dst[i] = __float2bfloat16_rn(src[i]);
}

// Bits that hold every expert index below n.
int KeyBits(int32_t n) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) < n) ++bits;
  return bits;
}

}  // namespace

void MoePermute(const MoeParams& p, MoeScratch& s, cudaStream_t stream) {
  const int64_t pairs = p.num_tokens * p.top_k;
  const int32_t N = p.num_experts;
  LS_CUDA_REQUIRE(pairs < (int64_t{1} << 31), "MoeExperts: too many routed rows");
  s.counts = s.counts_mem.As<int32_t>(N, stream);
  s.offsets = s.offsets_mem.As<int32_t>(N + 1, stream);
  s.tile_offsets = s.tile_offsets_mem.As<int32_t>(N + 1, stream);
  s.slot_of = s.slot_of_mem.As<int32_t>(std::max<int64_t>(pairs, 1), stream);
  s.z = s.z_mem.As<uint16_t>(std::max<int64_t>(pairs * p.in_width, 1), stream);
  int32_t* pair_index = s.pair_index_mem.As<int32_t>(std::max<int64_t>(pairs, 1), stream);
  int32_t* sorted_ids = s.sorted_ids_mem.As<int32_t>(std::max<int64_t>(pairs, 1), stream);
  int32_t* sorted_pairs = s.sorted_pairs_mem.As<int32_t>(std::max<int64_t>(pairs, 1), stream);

  LS_CUDA_CHECK(cudaMemsetAsync(s.counts, 0, static_cast<size_t>(N) * sizeof(int32_t), stream));
  if (pairs > 0) {
    CountKernel<<<GridFor(pairs), kThreads, 0, stream>>>(p.topk_ids, pairs, s.counts, pair_index);
    LS_CUDA_CHECK_LAUNCH();
  }
  OffsetsKernel<<<1, kScanThreads, 0, stream>>>(s.counts, N, s.offsets, s.tile_offsets);
  LS_CUDA_CHECK_LAUNCH();
  if (pairs == 0) return;

  // Stable sort of pair indices by expert: slot order inside a group is token order.
  const int items = static_cast<int>(pairs), bits = KeyBits(N);
  size_t temp_bytes = 0;
  LS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, p.topk_ids, sorted_ids, pair_index, sorted_pairs,
                                                items, 0, bits, stream));
  void* temp = s.sort_temp_mem.Get(std::max<size_t>(temp_bytes, 1), stream);
  LS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, p.topk_ids, sorted_ids, pair_index, sorted_pairs,
                                                items, 0, bits, stream));
  GatherKernel<<<static_cast<unsigned>(pairs), kThreads, 0, stream>>>(p.z, sorted_pairs, p.top_k, p.in_width, s.slot_of,
                                                                      reinterpret_cast<__nv_bfloat16*>(s.z));
  LS_CUDA_CHECK_LAUNCH();
}

void MoeGroupedGemms(const MoeParams& p, const ExpertTable& experts, MoeScratch& s, cudaStream_t stream) {
  const int64_t pairs = p.num_tokens * p.top_k, f = experts.width;
  if (pairs == 0) return;
  s.act = s.act_mem.As<uint16_t>(pairs * f, stream);
  s.y = s.y_mem.As<float>(pairs * p.out_width, stream);
  ExpertRows rows;
  rows.counts = s.counts;
  rows.offsets = s.offsets;
  rows.tile_offsets = s.tile_offsets;
  rows.num_experts = p.num_experts;
  rows.num_rows = pairs;
  if (experts.fp8) {
    const int64_t in_blocks = (p.in_width + 127) / 128, f_blocks = (f + 127) / 128;
    s.z8 = s.z8_mem.As<uint8_t>(pairs * p.in_width, stream);
    s.z8_scales = s.z8_scales_mem.As<float>(pairs * in_blocks, stream);
    s.act8 = s.act8_mem.As<uint8_t>(pairs * f, stream);
    s.act8_scales = s.act8_scales_mem.As<float>(pairs * f_blocks, stream);
    RoundBf16RowsToFp8(s.z, pairs, p.in_width, s.z8, s.z8_scales, stream);
    GroupedGemmGluFp8(s.z8, s.z8_scales, experts.gate, experts.up, f, p.in_width, rows, p.act, s.act, stream);
    RoundBf16RowsToFp8(s.act, pairs, f, s.act8, s.act8_scales, stream);
    GroupedGemmFp8(s.act8, s.act8_scales, experts.down, p.out_width, f, rows, s.y, stream);
    return;
  }
  GroupedGemmGlu(s.z, experts.gate, experts.up, f, p.in_width, rows, p.act, s.act, stream);
  GroupedGemm(s.act, experts.down, p.out_width, f, rows, s.y, stream);
}

void MoeCombine(const MoeParams& p, MoeScratch& s, cudaStream_t stream) {
  if (p.num_tokens == 0) return;
  CombineExpertOutputs(s.y, s.slot_of, p.topk_weights, p.num_tokens, p.top_k, p.out_width, p.out, stream);
}

void MoeExperts(const MoeParams& p, const ExpertTable& experts, MoeScratch& s, cudaStream_t stream) {
  MoePermute(p, s, stream);
  MoeGroupedGemms(p, experts, s, stream);
  MoeCombine(p, s, stream);
}

}  // namespace ls::cuda
