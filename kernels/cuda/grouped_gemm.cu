// Grouped GEMMs of the routed experts on the tensor cores (see grouped_gemm.h).
// One block computes a 64 × 64 output tile of one expert's rows: the block finds its expert by a
// binary search over the tile offsets, streams 64-wide slices of K through shared memory (the
// next slice is loaded into registers while the current one is multiplied) and issues
// mma.sync.m16n8k16 with FP32 accumulators, four warps of 32 × 32 each. The GLU variant keeps a
// gate and an up accumulator per element and applies the activation in the epilogue. Quantized
// weights are loaded as codes and scales (8 codes and one scale per thread and chunk: 4 bytes for
// E2M1 and U4, 8 for FP8) and widened to BF16 as they are stored to shared memory, so that the
// load of the next slice overlaps the multiplication of this one as for BF16 weights. FP8 weights
// in 128 × 128 blocks can instead meet FP8 activations on the FP8 tensor cores (GroupedGemmFp8).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grouped_gemm.h"
#include "kernels/cuda/weight_codes.cuh"

namespace ls::cuda {
namespace {

constexpr int kBM = kGroupedGemmTileRows;  // rows of a tile
constexpr int kBN = 64;                    // output columns of a tile
constexpr int kBK = 64;                    // K slice per shared-memory stage
constexpr int kLd = kBK + 8;               // shared row stride: 144 bytes, free of bank conflicts
constexpr int kThreads = 128;              // four warps, 2 × 2 over the tile
constexpr int kChunksPerRow = kBK / 8;     // 16-byte chunks per row of a slice
// 16-byte chunks each thread loads per matrix and slice.
constexpr int kChunks = kBM * kChunksPerRow / kThreads;
static_assert(kBM == kBN, "A and B slices share the chunk mapping");
static_assert(kBM == 64 && kBN == 64, "the warp layout covers a 64 x 64 tile");

// D = A · B + D for one m16n8k16 tile; A row-major 16 × 16, B column-major 16 × 8, BF16.
__device__ inline void Mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two consecutive BF16 values of shared memory as one register (lower index in the low half).
__device__ inline uint32_t Pair(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

__device__ inline bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Elements col .. col + 7 of a row of length k; zeros past its end, or for an absent row (null).
__device__ inline uint4 LoadChunk(const uint16_t* row, int64_t col, int64_t k, bool vec) {
  if (row == nullptr) return make_uint4(0, 0, 0, 0);
  if (vec && col + 8 <= k) return __ldg(reinterpret_cast<const uint4*>(row + col));
  union {
    uint4 v;
    uint16_t h[8];
  } u;
#pragma unroll
  for (int j = 0; j < 8; ++j) u.h[j] = col + j < k ? row[col + j] : uint16_t{0};
  return u.v;
}

// One expert matrix as a block reads it: BF16 values or codes, and the scale grid.
struct WeightView {
  const unsigned char* data = nullptr;  // row 0
  const void* scale = nullptr;
  const uint8_t* zero = nullptr;
  DType scale_dtype = DType::kF32;
  int32_t block_rows = 1, block_cols = 1;
  int64_t scale_cols = 0;
  int32_t default_zero = 0;
  bool vec = false;  // chunks inside the row are read as one aligned word, under one scale
};

// The registers of one 8-element weight chunk between its load and its store: BF16 values, or
// the codes with the scale (and zero point) of their block.
struct CodesChunk {
  uint2 codes;  // 4-bit: codes.x, element j in bits 4j..4j+3; FP8: codes.x, codes.y, element j in byte j
  float scale;
  int32_t zero;
};
template <DType kCodes>
using WeightChunk = std::conditional_t<kCodes == DType::kBF16, uint4, CodesChunk>;

// Where a chunk's row of a quantized matrix is: its codes (null for a row past n) and the offset
// of its block row in the scale grid.
struct CodesRow {
  const unsigned char* codes = nullptr;
  int64_t grid = 0;
};

template <DType kCodes>
__device__ inline WeightView ViewOf(const ExpertWeight& w, int64_t k) {
  WeightView v;
  v.data = static_cast<const unsigned char*>(w.data);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(w.data);
  if constexpr (kCodes == DType::kBF16) {
    v.vec = k % 8 == 0 && (addr & 15u) == 0;
  } else {
    v.scale = w.scale;
    v.zero = w.zero;
    v.scale_dtype = w.scale_dtype;
    v.block_rows = w.block_rows;
    v.block_cols = w.block_cols;
    v.scale_cols = (k + w.block_cols - 1) / w.block_cols;
    v.default_zero = kCodes == DType::kU4 ? 8 : 0;
    const uintptr_t word = kCodes == DType::kF8E4M3 ? 7u : 3u;
    v.vec = k % 8 == 0 && w.block_cols % 8 == 0 && (addr & word) == 0;
  }
  return v;
}

// Byte offset of element col in a row of codes.
template <DType kCodes>
__device__ inline int64_t CodeByte(int64_t col) {
  return kCodes == DType::kF8E4M3 ? col : col / 2;
}

// Code of element col of a row (4-bit: its nibble; FP8: its byte).
template <DType kCodes>
__device__ inline uint32_t CodeAt(const unsigned char* row, int64_t col) {
  const uint32_t b = row[CodeByte<kCodes>(col)];
  if constexpr (kCodes == DType::kF8E4M3) {
    return b;
  } else {
    return (col & 1) ? b >> 4 : b & 15u;
  }
}

// The loads of a quantized chunk whose codes are one aligned word under one scale (view.vec,
// col + 8 <= k); other chunks are read element by element when stored (WidenChunk).
template <DType kCodes>
__device__ inline CodesChunk LoadCodes(const WeightView& v, const CodesRow& row, int64_t col, int64_t k) {
  CodesChunk c{make_uint2(0, 0), 0.f, 0};
  if (row.codes == nullptr || !v.vec || col + 8 > k) return c;
  if constexpr (kCodes == DType::kF8E4M3) {
    c.codes = __ldg(reinterpret_cast<const uint2*>(row.codes + col));
  } else {
    c.codes.x = __ldg(reinterpret_cast<const uint32_t*>(row.codes + col / 2));
  }
  const int64_t block = row.grid + col / v.block_cols;
  c.scale = ScaleValue(v.scale, v.scale_dtype, block);
  c.zero = v.zero ? static_cast<int32_t>(__ldg(v.zero + block)) : v.default_zero;
  return c;
}

// The eight BF16 weights of a chunk, lower element in the lower half of each word.
template <DType kCodes>
__device__ inline uint4 WidenChunk(const WeightView& v, const CodesRow& row, int64_t col, int64_t k,
                                   const CodesChunk& c) {
  uint32_t h[8];
  if (row.codes != nullptr && v.vec && col + 8 <= k) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint32_t code;
      if constexpr (kCodes == DType::kF8E4M3) {
        code = ((j < 4 ? c.codes.x : c.codes.y) >> (8 * (j % 4))) & 0xffu;
      } else {
        code = (c.codes.x >> (4 * j)) & 15u;
      }
      h[j] = WeightBf16<kCodes>(code, c.zero, c.scale);
    }
  } else {
    // Edge or unaligned chunk: each element with its own block's scale; zeros past k or n.
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t e = col + j;
      h[j] = 0;
      if (row.codes == nullptr || e >= k) continue;
      const int64_t block = row.grid + e / v.block_cols;
      const int32_t zero = v.zero ? static_cast<int32_t>(v.zero[block]) : v.default_zero;
      h[j] = WeightBf16<kCodes>(CodeAt<kCodes>(row.codes, e), zero, ScaleValue(v.scale, v.scale_dtype, block));
    }
  }
  return make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}

// The row tile of this block (blockIdx.x): its expert (the e with tile_offsets[e] <= tile <
// tile_offsets[e + 1], by binary search), its first permuted row and how many of its kBM rows
// exist. False for blocks past the last tile.
struct RowTile {
  int32_t expert = 0, valid_rows = 0;
  int64_t row0 = 0;
};
__device__ inline bool FindRowTile(const ExpertRows& rows, RowTile* out) {
  const int32_t tile = static_cast<int32_t>(blockIdx.x);
  if (tile >= rows.tile_offsets[rows.num_experts]) return false;
  int32_t lo = 0, hi = rows.num_experts;
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) / 2;
    if (rows.tile_offsets[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const int32_t m0 = (tile - rows.tile_offsets[lo]) * kBM;
  out->expert = lo;
  out->valid_rows = min(kBM, rows.counts[lo] - m0);
  out->row0 = static_cast<int64_t>(rows.offsets[lo]) + m0;
  return true;
}

// Epilogue of a warp's 32 × 32 part of a tile: accumulator i of an m16n8 tile holds row g (+8 for
// i >= 2), column 2t + (i & 1); GLU: BF16 act(acc[0]) · acc[1], else float32 acc[0].
template <bool kGlu, int kMats>
__device__ inline void StoreTile(const float (&acc)[kMats][2][4][4], int warp_row, int warp_col, int g, int t,
                                 int32_t valid_rows, int64_t row0, int64_t n0, int64_t n, GluAct act, void* out) {
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = warp_row + mi * 16 + g + (i >= 2 ? 8 : 0);
        const int64_t col = n0 + warp_col + ni * 8 + t * 2 + (i & 1);
        if (r >= valid_rows || col >= n) continue;
        const int64_t idx = (row0 + r) * n + col;
        if constexpr (kGlu) {
          const float v = GluValue(act, acc[0][mi][ni][i], acc[kMats - 1][mi][ni][i]);
          static_cast<__nv_bfloat16*>(out)[idx] = __float2bfloat16_rn(v);
        } else {
          static_cast<float*>(out)[idx] = acc[0][mi][ni][i];
        }
      }
    }
  }
}

// Grid: (row tiles, ceil(n / kBN)); blocks past the last row tile exit at once.
// kGlu: out is BF16 act(a · w0ᵀ) · (a · w1ᵀ); else out is float32 a · w0ᵀ. kCodes: the weights'
// format (w0 and w1 alike).
template <bool kGlu, DType kCodes>
__global__ void __launch_bounds__(kThreads)
    GroupedGemmKernel(const uint16_t* __restrict__ a, const ExpertWeight* __restrict__ w0,
                      const ExpertWeight* __restrict__ w1, int64_t n, int64_t k, ExpertRows rows, GluAct act,
                      void* __restrict__ out) {
  constexpr int kMats = kGlu ? 2 : 1;
  constexpr bool kQuantized = kCodes != DType::kBF16;
  __shared__ __align__(16) uint16_t sa[kBM * kLd];
  __shared__ __align__(16) uint16_t sb[kMats][kBN * kLd];

  // The expert of this row tile: the e with tile_offsets[e] <= tile < tile_offsets[e + 1].
  RowTile tile;
  if (!FindRowTile(rows, &tile)) return;
  const int32_t e = tile.expert, valid_rows = tile.valid_rows;
  const int64_t row0 = tile.row0, n0 = static_cast<int64_t>(blockIdx.y) * kBN;

  WeightView w[kMats];
  w[0] = ViewOf<kCodes>(w0[e], k);
  if constexpr (kGlu) w[1] = ViewOf<kCodes>(w1[e], k);

  // This thread's chunks: rows r0 + 16 i of a slice, columns c8 .. c8 + 7.
  const int r0 = threadIdx.x / kChunksPerRow;
  const int c8 = (threadIdx.x % kChunksPerRow) * 8;
  constexpr int kRowStep = kThreads / kChunksPerRow;
  const bool vec_a = k % 8 == 0 && Aligned16(a);
  const uint16_t* a_row[kChunks];
  // BF16: the row's values; quantized: its codes and block row.
  std::conditional_t<kQuantized, CodesRow, const uint16_t*> w_row[kMats][kChunks];
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int r = r0 + i * kRowStep;
    a_row[i] = r < valid_rows ? a + (row0 + r) * k : nullptr;
#pragma unroll
    for (int m = 0; m < kMats; ++m) {
      const bool in = n0 + r < n;
      if constexpr (kQuantized) {
        w_row[m][i].codes = in ? w[m].data + (n0 + r) * CodeByte<kCodes>(k) : nullptr;
        w_row[m][i].grid = in ? (n0 + r) / w[m].block_rows * w[m].scale_cols : 0;
      } else {
        w_row[m][i] = in ? reinterpret_cast<const uint16_t*>(w[m].data) + (n0 + r) * k : nullptr;
      }
    }
  }

  uint4 ra[kChunks];
  WeightChunk<kCodes> rw[kMats][kChunks];
  auto load = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      ra[i] = LoadChunk(a_row[i], k0 + c8, k, vec_a);
#pragma unroll
      for (int m = 0; m < kMats; ++m) {
        if constexpr (kQuantized) {
          rw[m][i] = LoadCodes<kCodes>(w[m], w_row[m][i], k0 + c8, k);
        } else {
          rw[m][i] = LoadChunk(w_row[m][i], k0 + c8, k, w[m].vec);
        }
      }
    }
  };
  auto store = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int r = r0 + i * kRowStep;
      *reinterpret_cast<uint4*>(&sa[r * kLd + c8]) = ra[i];
#pragma unroll
      for (int m = 0; m < kMats; ++m) {
        uint4 v;
        if constexpr (kQuantized) {
          v = WidenChunk<kCodes>(w[m], w_row[m][i], k0 + c8, k, rw[m][i]);
        } else {
          v = rw[m][i];
        }
        *reinterpret_cast<uint4*>(&sb[m][r * kLd + c8]) = v;
      }
    }
  };

  // Fragment coordinates (PTX ISA, mma.m16n8k16): group g = lane / 4, thread t = lane % 4.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int warp_row = (warp / 2) * 32, warp_col = (warp % 2) * 32;
  float acc[kMats][2][4][4] = {};

  const int64_t k_tiles = (k + kBK - 1) / kBK;
  load(0);
  store(0);
  __syncthreads();
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    if (kt + 1 < k_tiles) load((kt + 1) * kBK);
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t af[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const uint16_t* base = &sa[(warp_row + mi * 16 + g) * kLd + kk + t * 2];
        af[mi][0] = Pair(base);                // row g,     k 2t, 2t+1
        af[mi][1] = Pair(base + 8 * kLd);      // row g + 8, k 2t, 2t+1
        af[mi][2] = Pair(base + 8);            // row g,     k 2t+8, 2t+9
        af[mi][3] = Pair(base + 8 * kLd + 8);  // row g + 8, k 2t+8, 2t+9
      }
#pragma unroll
      for (int m = 0; m < kMats; ++m) {
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const uint16_t* base = &sb[m][(warp_col + ni * 8 + g) * kLd + kk + t * 2];
          const uint32_t bf[2] = {Pair(base), Pair(base + 8)};  // column g, k 2t, 2t+1 | 2t+8, 2t+9
#pragma unroll
          for (int mi = 0; mi < 2; ++mi) Mma(acc[m][mi][ni], af[mi], bf);
        }
      }
    }
    __syncthreads();
    if (kt + 1 < k_tiles) {
      store((kt + 1) * kBK);
      __syncthreads();
    }
  }

  StoreTile<kGlu>(acc, warp_row, warp_col, g, t, valid_rows, row0, n0, n, act, out);
}

// FP8 variant (GroupedGemmFp8): e4m3 activations and weights straight from memory to shared
// memory, mma.sync.m16n8k32 on the FP8 tensor cores, one 128-wide K slice per stage = one scale
// block: each slice's products are summed in their own FP32 accumulators and added to the output's
// with the activation row's and the weight block's scales (DeepSeek-V3's promotion per block).
constexpr int kBK8 = 128;                          // K slice: one scale block
constexpr int kLd8 = kBK8 + 16;                    // shared row stride in bytes: 16-byte aligned
constexpr int kChunksPerRow8 = kBK8 / 16;          // 16-byte chunks per row of a slice
constexpr int kChunks8 = kBM * kChunksPerRow8 / kThreads;
constexpr int kRowStep8 = kThreads / kChunksPerRow8;

// D = A · B + D for one m16n8k32 tile; A row-major 16 × 32, B column-major 32 × 8, e4m3.
__device__ inline void MmaFp8(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Four consecutive e4m3 codes of shared memory as one register (lower index in the low byte).
__device__ inline uint32_t Quad(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Codes col .. col + 15 of a row (k a multiple of 16, the row 16-byte aligned); zeros past its end
// or for an absent row (null).
__device__ inline uint4 LoadCodes16(const uint8_t* row, int64_t col, int64_t k) {
  if (row == nullptr || col >= k) return make_uint4(0, 0, 0, 0);
  return __ldg(reinterpret_cast<const uint4*>(row + col));
}

template <bool kGlu>
__global__ void __launch_bounds__(kThreads)
    GroupedGemmFp8Kernel(const uint8_t* __restrict__ a, const float* __restrict__ a_scales,
                         const ExpertWeight* __restrict__ w0, const ExpertWeight* __restrict__ w1, int64_t n,
                         int64_t k, ExpertRows rows, GluAct act, void* __restrict__ out) {
  constexpr int kMats = kGlu ? 2 : 1;
  __shared__ __align__(16) uint8_t sa[kBM * kLd8];
  __shared__ __align__(16) uint8_t sb[kMats][kBN * kLd8];

  RowTile tile;
  if (!FindRowTile(rows, &tile)) return;
  const int32_t e = tile.expert, valid_rows = tile.valid_rows;
  const int64_t row0 = tile.row0, n0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int64_t k_blocks = (k + kBK8 - 1) / kBK8;
  const ExpertWeight* w[kMats] = {w0 + e};
  if constexpr (kGlu) w[1] = w1 + e;

  const int r0 = threadIdx.x / kChunksPerRow8;
  const int c16 = (threadIdx.x % kChunksPerRow8) * 16;
  const uint8_t* a_row[kChunks8];
  const uint8_t* w_row[kMats][kChunks8];
#pragma unroll
  for (int i = 0; i < kChunks8; ++i) {
    const int r = r0 + i * kRowStep8;
    a_row[i] = r < valid_rows ? a + (row0 + r) * k : nullptr;
#pragma unroll
    for (int m = 0; m < kMats; ++m) {
      const auto* codes = static_cast<const uint8_t*>(w[m]->data);
      w_row[m][i] = codes != nullptr && n0 + r < n ? codes + (n0 + r) * k : nullptr;
    }
  }
  uint4 ra[kChunks8], rw[kMats][kChunks8];
  auto load = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < kChunks8; ++i) {
      ra[i] = LoadCodes16(a_row[i], k0 + c16, k);
#pragma unroll
      for (int m = 0; m < kMats; ++m) rw[m][i] = LoadCodes16(w_row[m][i], k0 + c16, k);
    }
  };
  auto store = [&]() {
#pragma unroll
    for (int i = 0; i < kChunks8; ++i) {
      const int r = r0 + i * kRowStep8;
      *reinterpret_cast<uint4*>(&sa[r * kLd8 + c16]) = ra[i];
#pragma unroll
      for (int m = 0; m < kMats; ++m) *reinterpret_cast<uint4*>(&sb[m][r * kLd8 + c16]) = rw[m][i];
    }
  };

  // Fragment coordinates (PTX ISA, mma.m16n8k32 with 8-bit operands): group g = lane / 4, thread
  // t = lane % 4; a register holds four consecutive k.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int warp_row = (warp / 2) * 32, warp_col = (warp % 2) * 32;
  // The tile's 64 columns lie in one 128-row block of the weight's scale grid (n0 is a multiple of 64).
  const int64_t w_block_row = n0 / kBK8;
  float acc[kMats][2][4][4] = {};

  load(0);
  store();
  __syncthreads();
  for (int64_t kt = 0; kt < k_blocks; ++kt) {
    if (kt + 1 < k_blocks) load((kt + 1) * kBK8);
    // The row scales of this thread's accumulators for this block.
    float sx[2][2];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp_row + mi * 16 + g + 8 * h;
        sx[mi][h] = r < valid_rows ? __ldg(a_scales + (row0 + r) * k_blocks + kt) : 0.f;
      }
    }
    // One matrix at a time (fewer live registers): the block's sums in fresh accumulators, then
    // added to the output's times the row's and the weight block's scales.
#pragma unroll
    for (int m = 0; m < kMats; ++m) {
      float part[2][4][4] = {};
#pragma unroll
      for (int kk = 0; kk < kBK8; kk += 32) {
        uint32_t af[2][4];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          const uint8_t* base = &sa[(warp_row + mi * 16 + g) * kLd8 + kk + t * 4];
          af[mi][0] = Quad(base);                  // row g,     k 4t .. 4t+3
          af[mi][1] = Quad(base + 8 * kLd8);       // row g + 8, k 4t .. 4t+3
          af[mi][2] = Quad(base + 16);             // row g,     k 4t+16 .. 4t+19
          af[mi][3] = Quad(base + 8 * kLd8 + 16);  // row g + 8, k 4t+16 .. 4t+19
        }
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const uint8_t* base = &sb[m][(warp_col + ni * 8 + g) * kLd8 + kk + t * 4];
          const uint32_t bf[2] = {Quad(base), Quad(base + 16)};  // column g, k 4t .. 4t+3 | 4t+16 .. 4t+19
#pragma unroll
          for (int mi = 0; mi < 2; ++mi) MmaFp8(part[mi][ni], af[mi], bf);
        }
      }
      const float sw = w[m]->scale ? ScaleValue(w[m]->scale, w[m]->scale_dtype, w_block_row * k_blocks + kt) : 0.f;
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[m][mi][ni][i] += part[mi][ni][i] * (sx[mi][i >= 2] * sw);
    }
    __syncthreads();
    if (kt + 1 < k_blocks) {
      store();
      __syncthreads();
    }
  }

  StoreTile<kGlu>(acc, warp_row, warp_col, g, t, valid_rows, row0, n0, n, act, out);
}

// Row tiles the grid must cover: each expert's rows in tiles, at most one partial tile per
// active expert, and at most num_rows active experts.
unsigned MaxRowTiles(const ExpertRows& rows) {
  const int64_t tiles = (rows.num_rows + kBM - 1) / kBM + std::min<int64_t>(rows.num_experts, rows.num_rows);
  return static_cast<unsigned>(tiles);
}

template <bool kGlu, DType kCodes>
void LaunchAs(const uint16_t* a, const ExpertWeight* w0, const ExpertWeight* w1, int64_t n, int64_t k,
              const ExpertRows& rows, GluAct act, void* out, cudaStream_t stream) {
  const dim3 grid(MaxRowTiles(rows), static_cast<unsigned>((n + kBN - 1) / kBN));
  GroupedGemmKernel<kGlu, kCodes><<<grid, kThreads, 0, stream>>>(a, w0, w1, n, k, rows, act, out);
  LS_CUDA_CHECK_LAUNCH();
}

template <bool kGlu>
void Launch(const uint16_t* a, const ExpertMatrices& w0, const ExpertMatrices& w1, int64_t n, int64_t k,
            const ExpertRows& rows, GluAct act, void* out, cudaStream_t stream) {
  if (rows.num_rows == 0 || n == 0) return;
  LS_CUDA_REQUIRE((n + kBN - 1) / kBN <= 65535, "GroupedGemm: output width too large");
  LS_CUDA_REQUIRE(w0.codes == w1.codes, "GroupedGemmGlu: gate and up weights must share one format");
  LS_CUDA_REQUIRE((w0.codes != DType::kE2M1 && w0.codes != DType::kU4) || k % 2 == 0,
                  "GroupedGemm: rows of 4-bit codes need an even k");
  switch (w0.codes) {
    case DType::kBF16:
      return LaunchAs<kGlu, DType::kBF16>(a, w0.experts, w1.experts, n, k, rows, act, out, stream);
    case DType::kE2M1:
      return LaunchAs<kGlu, DType::kE2M1>(a, w0.experts, w1.experts, n, k, rows, act, out, stream);
    case DType::kU4:
      return LaunchAs<kGlu, DType::kU4>(a, w0.experts, w1.experts, n, k, rows, act, out, stream);
    case DType::kF8E4M3:
      return LaunchAs<kGlu, DType::kF8E4M3>(a, w0.experts, w1.experts, n, k, rows, act, out, stream);
    default:
      LS_CUDA_REQUIRE(GroupedGemmReadsCodes(w0.codes), "GroupedGemm: weights must be BF16, E2M1, U4 or F8_E4M3");
      return;
  }
}

template <bool kGlu>
void LaunchFp8(const uint8_t* a, const float* a_scales, const ExpertMatrices& w0, const ExpertMatrices& w1, int64_t n,
               int64_t k, const ExpertRows& rows, GluAct act, void* out, cudaStream_t stream) {
  if (rows.num_rows == 0 || n == 0) return;
  LS_CUDA_REQUIRE((n + kBN - 1) / kBN <= 65535, "GroupedGemmFp8: output width too large");
  LS_CUDA_REQUIRE(w0.codes == DType::kF8E4M3 && w1.codes == DType::kF8E4M3 && k % 16 == 0 && n % 16 == 0,
                  "GroupedGemmFp8: weights must be F8_E4M3 with 128 x 128 block scales, n and k multiples of 16");
  const dim3 grid(MaxRowTiles(rows), static_cast<unsigned>((n + kBN - 1) / kBN));
  GroupedGemmFp8Kernel<kGlu><<<grid, kThreads, 0, stream>>>(a, a_scales, w0.experts, w1.experts, n, k, rows, act, out);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void GroupedGemmGluFp8(const uint8_t* a, const float* a_scales, const ExpertMatrices& gate, const ExpertMatrices& up,
                       int64_t n, int64_t k, const ExpertRows& rows, GluAct act, uint16_t* out, cudaStream_t stream) {
  LaunchFp8<true>(a, a_scales, gate, up, n, k, rows, act, out, stream);
}

void GroupedGemmFp8(const uint8_t* a, const float* a_scales, const ExpertMatrices& w, int64_t n, int64_t k,
                    const ExpertRows& rows, float* out, cudaStream_t stream) {
  LaunchFp8<false>(a, a_scales, w, w, n, k, rows, Activation::kSiTU, out, stream);
}

void GroupedGemmGlu(const uint16_t* a, const ExpertMatrices& gate, const ExpertMatrices& up, int64_t n, int64_t k,
                    const ExpertRows& rows, GluAct act, uint16_t* out, cudaStream_t stream) {
  Launch<true>(a, gate, up, n, k, rows, act, out, stream);
}

void GroupedGemm(const uint16_t* a, const ExpertMatrices& w, int64_t n, int64_t k, const ExpertRows& rows, float* out,
                 cudaStream_t stream) {
  Launch<false>(a, w, w, n, k, rows, Activation::kSiTU, out, stream);
}

bool GroupedGemmReads(const Tensor& w) {
  if (!w.quantized() || w.layout != Layout::kRowMajor || w.quant.block_rows < 1 || w.quant.block_cols < 1) return false;
  const DType s = w.quant.scale_dtype;
  const bool float_scales = s == DType::kF32 || s == DType::kBF16 || s == DType::kF16;
  switch (w.dtype) {
    case DType::kE2M1:
      return s == DType::kE8M0 && !w.quant.zero && w.cols % 2 == 0;
    case DType::kU4:
      return float_scales && w.cols % 2 == 0;
    case DType::kF8E4M3:
      return float_scales && !w.quant.zero;
    default:
      return false;
  }
}

}  // namespace ls::cuda
