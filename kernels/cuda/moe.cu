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

#include "kernels/cuda/cuda_backend.h"
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

// 1. Counts and offsets per expert, the permutation (pairs grouped by expert, token order inside a
// group) and the permuted inputs in BF16; the counts stay in s.counts until the next call.
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

// 2. Per active expert: act = GLU(z·gateᵀ, z·upᵀ) in one grouped GEMM, then y = act·downᵀ
// (experts.fp8: z and act rounded to e4m3 per row and 128 columns, the FP8 grouped GEMMs).
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

// 3. out[t] = Σ_k w[t, k] · y[slot of (t, k)] in k order.
void MoeCombine(const MoeParams& p, MoeScratch& s, cudaStream_t stream) {
  if (p.num_tokens == 0) return;
  CombineExpertOutputs(s.y, s.slot_of, p.topk_weights, p.num_tokens, p.top_k, p.out_width, p.out, stream);
}

}  // namespace ls::cuda

// CudaBackend::MoeExperts: the op on the backend's stream.
namespace ls {

namespace {

constexpr size_t kMaxExpertTables = 1024;

// How the grouped GEMMs read a prepared expert weight (BF16 values, or codes and scales).
cuda::ExpertWeight DescribeExpertWeight(const Tensor& t) {
  cuda::ExpertWeight w;
  w.data = t.data;
  if (t.quantized()) {
    w.scale = t.quant.scale;
    w.zero = static_cast<const uint8_t*>(t.quant.zero);
    w.scale_dtype = t.quant.scale_dtype;
    w.block_rows = t.quant.block_rows;
    w.block_cols = t.quant.block_cols;
  }
  return w;
}

bool SameWeight(const cuda::ExpertWeight& a, const cuda::ExpertWeight& b) {
  return a.data == b.data && a.scale == b.scale && a.zero == b.zero && a.scale_dtype == b.scale_dtype &&
         a.block_rows == b.block_rows && a.block_cols == b.block_cols;
}

}  // namespace

const cuda::ExpertTable& CudaBackend::ExpertTableFor(const MoeParams& p) {
  const int32_t N = p.num_experts;
  std::vector<cuda::ExpertWeight> host(static_cast<size_t>(3 * N));
  for (int32_t e = 0; e < N; ++e) {
    host[e] = DescribeExpertWeight(p.gate[e]);
    host[N + e] = DescribeExpertWeight(p.up[e]);
    host[2 * N + e] = DescribeExpertWeight(p.down[e]);
  }
  const auto key = std::make_tuple(p.gate, p.up, p.down, N);
  if (expert_tables_.size() >= kMaxExpertTables && !expert_tables_.count(key)) {
    // Arrays come and go (expert placements are rebuilt): drop the old tables at some point.
    LS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (auto& [k, old] : expert_tables_) LS_CUDA_CHECK(cudaFree(old.device));
    expert_tables_.clear();
  }
  ExpertTableEntry& entry = expert_tables_[key];
  if (entry.device && std::equal(entry.host.begin(), entry.host.end(), host.begin(), host.end(), SameWeight))
    return entry.table;

  // New or changed array: check every expert, then upload its descriptions.
  int64_t width = 0;
  for (int32_t e = 0; e < N && width == 0; ++e)
    if (p.gate[e].data) width = p.gate[e].rows;
  // The format of each matrix (BF16 or the codes), the same for every expert.
  DType codes[3] = {DType::kBF16, DType::kBF16, DType::kBF16};
  bool first = true, blocks128 = true;  // every matrix quantized in 128 x 128 blocks
  for (int32_t e = 0; e < N; ++e) {
    if (!p.gate[e].data) continue;  // an empty slot: never routed to
    const Tensor* mats[3] = {&p.gate[e], &p.up[e], &p.down[e]};
    for (int i = 0; i < 3; ++i) {
      const Tensor& t = *mats[i];
      LS_CUDA_REQUIRE(t.data && t.layout == Layout::kRowMajor &&
                          ((t.dtype == DType::kBF16 && !t.quantized()) || cuda::GroupedGemmReads(t)),
                      "MoeExperts: expert weights must be prepared for WeightUse::kMatmulExpert");
      if (first) codes[i] = t.dtype;
      LS_CUDA_REQUIRE(t.dtype == codes[i], "MoeExperts: the experts of one array must share each matrix's format");
      blocks128 = blocks128 && !t.quant.zero && t.quant.block_rows == 128 && t.quant.block_cols == 128;
    }
    first = false;
    LS_CUDA_REQUIRE(p.gate[e].rows == width && p.gate[e].cols == p.in_width && p.up[e].rows == width &&
                        p.up[e].cols == p.in_width && p.down[e].rows == p.out_width && p.down[e].cols == width,
                    "MoeExperts: expert weight shapes disagree with each other or with in_width/out_width");
  }
  LS_CUDA_REQUIRE(codes[0] == codes[1], "MoeExperts: gate and up weights must share one format");
  const bool fp8_blocks = !first && blocks128 && codes[0] == DType::kF8E4M3 && codes[2] == DType::kF8E4M3 &&
                          width % 16 == 0 && p.in_width % 16 == 0 && p.out_width % 16 == 0;
  if (!entry.device) {
    LS_CUDA_CHECK(cudaMalloc(&entry.device, std::max<size_t>(host.size() * sizeof(cuda::ExpertWeight), 1)));
  }
  LS_CUDA_CHECK(cudaMemcpyAsync(entry.device, host.data(), host.size() * sizeof(cuda::ExpertWeight),
                                cudaMemcpyHostToDevice, stream_));
  LS_CUDA_CHECK(cudaStreamSynchronize(stream_));  // rare: at first use and when the array changes
  entry.host = std::move(host);
  const auto* table = static_cast<const cuda::ExpertWeight*>(entry.device);
  entry.table = cuda::ExpertTable{{table, codes[0]}, {table + N, codes[1]}, {table + 2 * N, codes[2]}, width};
  entry.table.fp8_blocks = fp8_blocks;
  return entry.table;
}

void CudaBackend::MoeExperts(const MoeParams& p) {
  if (p.num_tokens == 0) return;
  Activate();
  cuda::ExpertTable table = ExpertTableFor(p);
  table.fp8 = table.fp8_blocks && fp8_gemms_;
  cuda::MoePermute(p, *moe_, stream_);
  if (p.tokens_per_expert) {
    const size_t n = static_cast<size_t>(p.num_experts);
    int32_t* buffer = PendingCountsBuffer(n);
    LS_CUDA_CHECK(cudaMemcpyAsync(buffer, moe_->counts, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    pending_counts_.push_back({p.tokens_per_expert, p.num_experts});
  }
  cuda::MoeGroupedGemms(p, table, *moe_, stream_);
  cuda::MoeCombine(p, *moe_, stream_);
}

}  // namespace ls
