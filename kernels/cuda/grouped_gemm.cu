// Grouped BF16 GEMMs of the routed experts on the tensor cores (see grouped_gemm.h).
// One block computes a 64 × 64 output tile of one expert's rows: the block finds its expert by a
// binary search over the tile offsets, streams 64-wide slices of K through shared memory (the
// next slice is loaded into registers while the current one is multiplied) and issues
// mma.sync.m16n8k16 with FP32 accumulators, four warps of 32 × 32 each. The GLU variant keeps a
// gate and an up accumulator per element and applies the activation in the epilogue.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grouped_gemm.h"

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

// Grid: (row tiles, ceil(n / kBN)); blocks past the last row tile exit at once.
// kGlu: out is BF16 act(a · w0ᵀ) · (a · w1ᵀ); else out is float32 a · w0ᵀ.
template <bool kGlu>
__global__ void __launch_bounds__(kThreads)
    GroupedGemmKernel(const uint16_t* __restrict__ a, const uint16_t* const* __restrict__ w0,
                      const uint16_t* const* __restrict__ w1, int64_t n, int64_t k, ExpertRows rows, GluAct act,
                      void* __restrict__ out) {
  constexpr int kMats = kGlu ? 2 : 1;
  __shared__ __align__(16) uint16_t sa[kBM * kLd];
  __shared__ __align__(16) uint16_t sb[kMats][kBN * kLd];

  // The expert of this row tile: the e with tile_offsets[e] <= tile < tile_offsets[e + 1].
  const int32_t tile = static_cast<int32_t>(blockIdx.x);
  if (tile >= rows.tile_offsets[rows.num_experts]) return;
  int32_t lo = 0, hi = rows.num_experts;
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) / 2;
    if (rows.tile_offsets[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const int32_t e = lo;
  const int32_t m0 = (tile - rows.tile_offsets[e]) * kBM;
  const int32_t valid_rows = min(kBM, rows.counts[e] - m0);
  const int64_t row0 = static_cast<int64_t>(rows.offsets[e]) + m0;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kBN;

  const uint16_t* w[kMats];
  w[0] = w0[e];
  if constexpr (kGlu) w[1] = w1[e];

  // This thread's chunks: rows r0 + 16 i of a slice, columns c8 .. c8 + 7.
  const int r0 = threadIdx.x / kChunksPerRow;
  const int c8 = (threadIdx.x % kChunksPerRow) * 8;
  constexpr int kRowStep = kThreads / kChunksPerRow;
  const bool vec_a = k % 8 == 0 && Aligned16(a);
  bool vec_w[kMats];
  const uint16_t* a_row[kChunks];
  const uint16_t* w_row[kMats][kChunks];
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int r = r0 + i * kRowStep;
    a_row[i] = r < valid_rows ? a + (row0 + r) * k : nullptr;
#pragma unroll
    for (int m = 0; m < kMats; ++m) w_row[m][i] = n0 + r < n ? w[m] + (n0 + r) * k : nullptr;
  }
#pragma unroll
  for (int m = 0; m < kMats; ++m) vec_w[m] = k % 8 == 0 && Aligned16(w[m]);

  uint4 ra[kChunks], rw[kMats][kChunks];
  auto load = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      ra[i] = LoadChunk(a_row[i], k0 + c8, k, vec_a);
#pragma unroll
      for (int m = 0; m < kMats; ++m) rw[m][i] = LoadChunk(w_row[m][i], k0 + c8, k, vec_w[m]);
    }
  };
  auto store = [&]() {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int r = r0 + i * kRowStep;
      *reinterpret_cast<uint4*>(&sa[r * kLd + c8]) = ra[i];
#pragma unroll
      for (int m = 0; m < kMats; ++m) *reinterpret_cast<uint4*>(&sb[m][r * kLd + c8]) = rw[m][i];
    }
  };

  // Fragment coordinates (PTX ISA, mma.m16n8k16): group g = lane / 4, thread t = lane % 4.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int warp_row = (warp / 2) * 32, warp_col = (warp % 2) * 32;
  float acc[kMats][2][4][4] = {};

  const int64_t k_tiles = (k + kBK - 1) / kBK;
  load(0);
  store();
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
      store();
      __syncthreads();
    }
  }

  // Epilogue: accumulator i of a tile holds row g (+8 for i >= 2), column 2t + (i & 1).
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

// Row tiles the grid must cover: each expert's rows in tiles, at most one partial tile per
// active expert, and at most num_rows active experts.
unsigned MaxRowTiles(const ExpertRows& rows) {
  const int64_t tiles = (rows.num_rows + kBM - 1) / kBM + std::min<int64_t>(rows.num_experts, rows.num_rows);
  return static_cast<unsigned>(tiles);
}

template <bool kGlu>
void Launch(const uint16_t* a, const uint16_t* const* w0, const uint16_t* const* w1, int64_t n, int64_t k,
            const ExpertRows& rows, GluAct act, void* out, cudaStream_t stream) {
  if (rows.num_rows == 0 || n == 0) return;
  LS_CUDA_REQUIRE((n + kBN - 1) / kBN <= 65535, "GroupedGemm: output width too large");
  const dim3 grid(MaxRowTiles(rows), static_cast<unsigned>((n + kBN - 1) / kBN));
  GroupedGemmKernel<kGlu><<<grid, kThreads, 0, stream>>>(a, w0, w1, n, k, rows, act, out);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void GroupedGemmGlu(const uint16_t* a, const uint16_t* const* gate, const uint16_t* const* up, int64_t n, int64_t k,
                    const ExpertRows& rows, GluAct act, uint16_t* out, cudaStream_t stream) {
  Launch<true>(a, gate, up, n, k, rows, act, out, stream);
}

void GroupedGemm(const uint16_t* a, const uint16_t* const* w, int64_t n, int64_t k, const ExpertRows& rows, float* out,
                 cudaStream_t stream) {
  Launch<false>(a, w, nullptr, n, k, rows, Activation::kSiTU, out, stream);
}

}  // namespace ls::cuda
