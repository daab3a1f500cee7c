// CUDA paged attention over the KV cache [num_blocks, block_size, Hkv, hd] of float32 or BF16
// values (read as float32; new rows rounded to nearest even when stored): first the
// step's new K/V go into their cache slots, then one block per (new token, KV head) serves that
// head's query group with a causal online softmax over the sequence's cached positions (or its
// last sliding_window ones). Prefill
// chunks and single-token decodes alike. Two kernels:
//   - WarpAttentionKernel, for query groups of up to 8 heads of up to 256 dims: each warp takes
//     every fourth position, reads its K and V rows once for the whole group, keeps the group's
//     queries, running max, sum and output in registers (lanes across the head dimension), and
//     the four warps' partial softmaxes are merged at the end. When a step has too few tokens to
//     fill the device, each context is split into ranges of positions, one block each, whose
//     partial softmaxes MergeSplitsKernel combines;
//   - TiledAttentionKernel, for larger groups: the group's state in shared memory, positions in
//     tiles of kTile.
// Twin of kernels/cpu/attention.cc.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/host_uploader.h"

namespace ls::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 32;  // cached positions per online-softmax step

// Element offset of (position, KV head 0) in the cache, through the sequence's block table.
__device__ inline int64_t SlotOffset(const int32_t* table, int32_t pos, int32_t block_size, int32_t kv_width) {
  return (static_cast<int64_t>(table[pos / block_size]) * block_size + pos % block_size) * kv_width;
}

// The first position a token at `pos` attends to: 0, or the start of its sliding window.
__device__ inline int32_t FirstPosition(int32_t pos, int32_t window) { return window > 0 ? max(0, pos + 1 - window) : 0; }

// Grid: one block per new token. T: the cache's element type (float or __nv_bfloat16), here and below.
template <typename T>
__global__ void WriteKvKernel(const float* __restrict__ k_new, const float* __restrict__ v_new,
                              const AttentionToken* __restrict__ tokens, const int32_t* __restrict__ tables,
                              int32_t kv_width, int32_t block_size, T* __restrict__ k_cache, T* __restrict__ v_cache) {
  const AttentionToken tok = tokens[blockIdx.x];
  const int64_t slot = SlotOffset(tables + tok.table, tok.pos, block_size, kv_width);
  const int64_t src = static_cast<int64_t>(tok.row) * kv_width;
  for (int32_t j = threadIdx.x; j < kv_width; j += kThreads) {
    k_cache[slot + j] = FromF32<T>(k_new[src + j]);
    v_cache[slot + j] = FromF32<T>(v_new[src + j]);
  }
}

// Grid: (new tokens, KV heads). Dynamic shared memory, floats:
//   q [group, hd] | acc [group, hd] | scores [group, kTile] | max [group] | sum [group] | rescale [group]
template <typename T>
__global__ void TiledAttentionKernel(const float* __restrict__ q, const T* __restrict__ k_cache,
                                     const T* __restrict__ v_cache, const AttentionToken* __restrict__ tokens,
                                     const int32_t* __restrict__ tables, int32_t num_heads, int32_t num_kv_heads,
                                     int32_t hd, int32_t block_size, float scale, int32_t window,
                                     float* __restrict__ out) {
  extern __shared__ float smem[];
  const int32_t group = num_heads / num_kv_heads;
  const int32_t kv_width = num_kv_heads * hd;
  const int32_t group_width = group * hd;
  float* sq = smem;
  float* acc = sq + group_width;
  float* sc = acc + group_width;
  float* run_max = sc + group * kTile;
  float* run_sum = run_max + group;
  float* rescale = run_sum + group;

  const AttentionToken tok = tokens[blockIdx.x];
  const int32_t kvh = blockIdx.y;
  const int32_t* table = tables + tok.table;
  const int64_t head0 = (static_cast<int64_t>(tok.row) * num_heads + static_cast<int64_t>(kvh) * group) * hd;
  for (int32_t i = threadIdx.x; i < group_width; i += kThreads) {
    sq[i] = q[head0 + i];
    acc[i] = 0.f;
  }
  for (int32_t g = threadIdx.x; g < group; g += kThreads) {
    run_max[g] = -INFINITY;
    run_sum[g] = 0.f;
  }
  __syncthreads();

  const int32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t ctx = tok.pos + 1;  // causal: positions first .. pos
  for (int32_t start = FirstPosition(tok.pos, window); start < ctx; start += kTile) {
    const int32_t n = min(kTile, ctx - start);
    // Scores: one warp per (query head, position), lanes across the head dimension.
    for (int32_t pair = warp; pair < group * n; pair += kWarps) {
      const int32_t g = pair / n, j = pair % n;
      const T* k = k_cache + SlotOffset(table, start + j, block_size, kv_width) + kvh * hd;
      float dot = 0.f;
      for (int32_t d = lane; d < hd; d += 32) dot += sq[g * hd + d] * ToF32(k[d]);
      for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      if (lane == 0) sc[g * kTile + j] = dot * scale;
    }
    __syncthreads();
    // Online softmax: new running max, probabilities of this tile, rescale of what came before.
    for (int32_t g = threadIdx.x; g < group; g += kThreads) {
      float* s = sc + g * kTile;
      float mx = run_max[g];
      for (int32_t j = 0; j < n; ++j) mx = fmaxf(mx, s[j]);
      const float r = expf(run_max[g] - mx);  // 0 on the first tile (max was -inf)
      float sum = 0.f;
      for (int32_t j = 0; j < n; ++j) {
        s[j] = expf(s[j] - mx);
        sum += s[j];
      }
      run_sum[g] = run_sum[g] * r + sum;
      run_max[g] = mx;
      rescale[g] = r;
    }
    __syncthreads();
    // acc = acc · rescale + Σ_j p_j · v_j, threads across (query head, dimension).
    for (int32_t i = threadIdx.x; i < group_width; i += kThreads) {
      const int32_t g = i / hd, d = i % hd;
      const float* s = sc + g * kTile;
      float a = acc[i] * rescale[g];
      for (int32_t j = 0; j < n; ++j)
        a += s[j] * ToF32(v_cache[SlotOffset(table, start + j, block_size, kv_width) + kvh * hd + d]);
      acc[i] = a;
    }
    __syncthreads();
  }
  for (int32_t i = threadIdx.x; i < group_width; i += kThreads) out[head0 + i] = acc[i] / run_sum[i / hd];
}

// Where the blocks of a split context leave their partial softmaxes: for block (token t, KV head
// h, split z), acc[((t · Hkv + h) · splits + z) · group · hd + g · hd + d] is Σ_j e^(s_j − m) v_j
// and max_sum[((t · Hkv + h) · splits + z) · group + g] is (m, Σ_j e^(s_j − m)), for query head
// g of the group; a split past the token's context writes nothing.
struct SplitPartials {
  int32_t len = 0;     // positions per split; 0: no split (the kernel writes out)
  int32_t window = 0;  // the sliding window (0: none): splits wholly before it are empty too
  float* acc = nullptr;
  float2* max_sum = nullptr;
};

// BF16 caches are read a pair of values at a time (one 4-byte load): a lane then holds dimensions
// 64 (i / 2) + 2 lane + i % 2, else lane + 32 i (i < kDims).
template <typename T, int kDims>
constexpr bool kPairs = std::is_same_v<T, __nv_bfloat16>&& kDims % 2 == 0;
template <typename T, int kDims>
__device__ __forceinline__ int32_t LaneDim(int32_t lane, int i) {
  if constexpr (kPairs<T, kDims>) {
    return 64 * (i / 2) + 2 * lane + i % 2;
  } else {
    return lane + 32 * i;
  }
}

// Grid: (new tokens, KV heads, splits). kDims: head dimensions per lane (hd <= 32 kDims); kGroup:
// query heads per KV head, at most (the group is num_heads / num_kv_heads). BF16 caches: hd even.
template <typename T, int kDims, int kGroup>
__global__ void __launch_bounds__(kThreads)
    WarpAttentionKernel(const float* __restrict__ q, const T* __restrict__ k_cache, const T* __restrict__ v_cache,
                        const AttentionToken* __restrict__ tokens, const int32_t* __restrict__ tables,
                        int32_t num_heads, int32_t num_kv_heads, int32_t hd, int32_t block_size, float scale,
                        SplitPartials split, float* __restrict__ out) {
  __shared__ float part_max[kWarps][kGroup], part_sum[kWarps][kGroup];
  __shared__ float part_acc[kWarps][kGroup][kDims * 32];
  const int32_t group = num_heads / num_kv_heads;
  const int32_t kv_width = num_kv_heads * hd;
  const AttentionToken tok = tokens[blockIdx.x];
  const int32_t kvh = blockIdx.y;
  const int32_t* table = tables + tok.table;
  const int64_t head0 = (static_cast<int64_t>(tok.row) * num_heads + static_cast<int64_t>(kvh) * group) * hd;
  const int32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Lane holds dimensions lane + 32 i of every head of the group; the query is pre-scaled.
  float qr[kGroup][kDims], acc[kGroup][kDims], run_max[kGroup], run_sum[kGroup];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
#pragma unroll
    for (int i = 0; i < kDims; ++i) {
      const int32_t d = LaneDim<T, kDims>(lane, i);
      qr[g][i] = g < group && d < hd ? q[head0 + g * hd + d] * scale : 0.f;
      acc[g][i] = 0.f;
    }
    run_max[g] = -INFINITY;
    run_sum[g] = 0.f;
  }

  // Causal: positions first .. pos (first > 0 in a sliding window), or this block's range of them.
  const int32_t first = FirstPosition(tok.pos, split.window);
  int32_t begin = first, end = tok.pos + 1;
  if (split.len > 0) {
    begin = static_cast<int32_t>(blockIdx.z) * split.len;
    end = min(end, begin + split.len);
    begin = max(begin, first);
    if (begin >= end) return;  // the whole block: nothing of this token's context here
  }
  // K and V rows of a position; the next position's are loaded while this one is used.
  auto load = [&](int32_t pos, float (&kr)[kDims], float (&vr)[kDims]) {
    const int64_t off = SlotOffset(table, pos, block_size, kv_width) + static_cast<int64_t>(kvh) * hd;
    if constexpr (kPairs<T, kDims>) {
#pragma unroll
      for (int i = 0; i < kDims; i += 2) {
        const int32_t d = LaneDim<T, kDims>(lane, i);  // even, and hd is: d + 1 < hd where d < hd
        float2 k2 = make_float2(0.f, 0.f), v2 = make_float2(0.f, 0.f);
        if (d < hd) {
          k2 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(k_cache + off + d));
          v2 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(v_cache + off + d));
        }
        kr[i] = k2.x, kr[i + 1] = k2.y, vr[i] = v2.x, vr[i + 1] = v2.y;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kDims; ++i) {
        const int32_t d = lane + 32 * i;
        kr[i] = d < hd ? ToF32(k_cache[off + d]) : 0.f;
        vr[i] = d < hd ? ToF32(v_cache[off + d]) : 0.f;
      }
    }
  };
  float kr[kDims], vr[kDims];
  if (begin + warp < end) load(begin + warp, kr, vr);
  for (int32_t pos = begin + warp; pos < end; pos += kWarps) {
    float kn[kDims], vn[kDims];
    if (pos + kWarps < end) load(pos + kWarps, kn, vn);
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      if (g >= group) break;  // uniform across the block
      float dot = 0.f;
#pragma unroll
      for (int i = 0; i < kDims; ++i) dot += qr[g][i] * kr[i];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      const float m = fmaxf(run_max[g], dot);
      const float rescale = expf(run_max[g] - m);  // 0 at the first position (max was -inf)
      const float prob = expf(dot - m);
      run_sum[g] = run_sum[g] * rescale + prob;
#pragma unroll
      for (int i = 0; i < kDims; ++i) acc[g][i] = acc[g][i] * rescale + prob * vr[i];
      run_max[g] = m;
    }
#pragma unroll
    for (int i = 0; i < kDims; ++i) {
      kr[i] = kn[i];
      vr[i] = vn[i];
    }
  }

  // Merge the warps' partial softmaxes (a warp that saw no position has max -inf and sum 0; the
  // block saw at least one).
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    if (g >= group) break;
    if (lane == 0) {
      part_max[warp][g] = run_max[g];
      part_sum[warp][g] = run_sum[g];
    }
#pragma unroll
    for (int i = 0; i < kDims; ++i) part_acc[warp][g][LaneDim<T, kDims>(lane, i)] = acc[g][i];
  }
  __syncthreads();
  for (int32_t idx = threadIdx.x; idx < group * hd; idx += kThreads) {
    const int32_t g = idx / hd, d = idx % hd;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, part_max[w][g]);
    float sum = 0.f, a = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = expf(part_max[w][g] - m);
      sum += part_sum[w][g] * f;
      a += part_acc[w][g][d] * f;
    }
    if (split.len == 0) {
      out[head0 + idx] = a / sum;
      continue;
    }
    const int64_t slot = (static_cast<int64_t>(blockIdx.x) * num_kv_heads + kvh) * gridDim.z + blockIdx.z;
    split.acc[slot * group * hd + idx] = a;
    if (d == 0) split.max_sum[slot * group + g] = make_float2(m, sum);
  }
}

// Grid: (new tokens, KV heads): out = the merge of the token's non-empty splits.
__global__ void MergeSplitsKernel(const AttentionToken* __restrict__ tokens, int32_t num_heads, int32_t num_kv_heads,
                                  int32_t hd, int32_t splits, SplitPartials split, float* __restrict__ out) {
  const int32_t group = num_heads / num_kv_heads;
  const AttentionToken tok = tokens[blockIdx.x];
  const int32_t kvh = blockIdx.y;
  const int32_t used = (tok.pos + split.len) / split.len;  // ceil((pos + 1) / len)
  const int32_t skipped = FirstPosition(tok.pos, split.window) / split.len;  // splits before the window
  const int64_t slot0 = (static_cast<int64_t>(blockIdx.x) * num_kv_heads + kvh) * splits;
  const int64_t head0 = (static_cast<int64_t>(tok.row) * num_heads + static_cast<int64_t>(kvh) * group) * hd;
  for (int32_t idx = threadIdx.x; idx < group * hd; idx += kThreads) {
    const int32_t g = idx / hd;
    float m = -INFINITY;
    for (int32_t z = skipped; z < used; ++z) m = fmaxf(m, split.max_sum[(slot0 + z) * group + g].x);
    float sum = 0.f, a = 0.f;
    for (int32_t z = skipped; z < used; ++z) {
      const float2 ms = split.max_sum[(slot0 + z) * group + g];
      const float f = expf(ms.x - m);
      sum += ms.y * f;
      a += split.acc[(slot0 + z) * group * hd + idx] * f;
    }
    out[head0 + idx] = a / sum;
  }
}

template <typename T>
using AttentionKernelFn = void (*)(const float*, const T*, const T*, const AttentionToken*, const int32_t*, int32_t,
                                   int32_t, int32_t, int32_t, float, SplitPartials, float*);

// Splits per context for a step: enough blocks for two per multiprocessor, with at least
// kMinSplit positions per split. 1: none.
constexpr int32_t kMinSplit = 64;
int32_t SplitsFor(int32_t num_tokens, int32_t num_kv_heads, int32_t max_context) {
  int device = 0, sms = 0;
  LS_CUDA_CHECK(cudaGetDevice(&device));
  LS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t blocks = static_cast<int64_t>(num_tokens) * num_kv_heads, want = 2 * static_cast<int64_t>(sms);
  if (blocks >= want) return 1;
  const int64_t by_blocks = (want + blocks - 1) / blocks;
  const int64_t by_context = (max_context + kMinSplit - 1) / kMinSplit;
  return static_cast<int32_t>(std::max<int64_t>(1, std::min(by_blocks, by_context)));
}

// The WarpAttentionKernel instance for a query group and head size, or null where registers
// would not hold the group's state (more than 32 values per lane for queries and outputs each).
template <typename T, int kDims>
AttentionKernelFn<T> WarpKernelFor(int32_t group) {
  if (group <= 1) return WarpAttentionKernel<T, kDims, 1>;
  if (group <= 2) return WarpAttentionKernel<T, kDims, 2>;
  if (group <= 4) return WarpAttentionKernel<T, kDims, 4>;
  if constexpr (kDims <= 4) {
    if (group <= 8) return WarpAttentionKernel<T, kDims, 8>;
  }
  return nullptr;
}

template <typename T>
AttentionKernelFn<T> WarpKernelFor(int32_t group, int32_t hd) {
  if (std::is_same_v<T, __nv_bfloat16> && hd > 32 && hd % 2 != 0) return nullptr;  // pairs need an even hd
  if (hd <= 32) return WarpKernelFor<T, 1>(group);
  if (hd <= 64) return WarpKernelFor<T, 2>(group);
  if (hd <= 128) return WarpKernelFor<T, 4>(group);
  if (hd <= 256) return WarpKernelFor<T, 8>(group);
  return nullptr;
}

}  // namespace

int32_t FlattenAttentionSeqs(const AttentionParams& p, std::vector<AttentionToken>* tokens,
                             std::vector<int32_t>* tables) {
  tokens->clear();
  tables->clear();
  int32_t max_context = 0;
  for (int32_t si = 0; si < p.num_seqs; ++si) {
    const AttentionSeq& s = p.seqs[si];
    const int32_t table = static_cast<int32_t>(tables->size());
    if (s.num_blocks > 0) tables->insert(tables->end(), s.block_table, s.block_table + s.num_blocks);
    for (int32_t i = 0; i < s.num_tokens; ++i) tokens->push_back({s.token_offset + i, s.start_pos + i, table});
    if (s.num_tokens > 0) max_context = std::max(max_context, s.start_pos + s.num_tokens);
  }
  return max_context;
}

void FlattenRecurrentSeqs(const AttentionSeq* seqs, int32_t num_seqs, std::vector<RecurrentSeq>* out_seqs,
                          std::vector<RecurrentToken>* out_tokens) {
  out_seqs->clear();
  out_tokens->clear();
  for (int32_t i = 0; i < num_seqs; ++i) {
    const AttentionSeq& s = seqs[i];
    const int32_t fresh = s.start_pos == 0 ? 1 : 0;
    out_seqs->push_back({s.token_offset, s.num_tokens, s.state_slot, fresh});
    for (int32_t t = 0; t < s.num_tokens; ++t) out_tokens->push_back({s.token_offset, t, s.state_slot, fresh});
  }
}

namespace {

// PagedAttention over a cache of T elements.
template <typename T>
void PagedAttentionOf(const AttentionParams& p, const AttentionToken* tokens, int32_t num_tokens,
                      const int32_t* block_tables, int32_t max_context, DeviceScratch* split_scratch,
                      cudaStream_t stream) {
  T* k_cache = static_cast<T*>(p.cache.k);
  T* v_cache = static_cast<T*>(p.cache.v);
  const int32_t kv_width = p.num_kv_heads * p.head_dim;
  WriteKvKernel<T><<<static_cast<unsigned>(num_tokens), kThreads, 0, stream>>>(
      p.k_new, p.v_new, tokens, block_tables, kv_width, p.cache.block_size, k_cache, v_cache);
  LS_CUDA_CHECK_LAUNCH();

  const int32_t group = p.num_heads / p.num_kv_heads;
  const dim3 grid(static_cast<unsigned>(num_tokens), static_cast<unsigned>(p.num_kv_heads));
  if (AttentionKernelFn<T> warp_kernel = WarpKernelFor<T>(group, p.head_dim)) {
    const int32_t splits = split_scratch ? SplitsFor(num_tokens, p.num_kv_heads, max_context) : 1;
    SplitPartials split;
    split.window = p.sliding_window;
    if (splits > 1) {
      split.len = (max_context + splits - 1) / splits;
      const int64_t slots = static_cast<int64_t>(num_tokens) * p.num_kv_heads * splits * group;
      float* mem = split_scratch->As<float>(static_cast<size_t>(slots * (p.head_dim + 2)), stream);
      split.max_sum = reinterpret_cast<float2*>(mem);  // 8-byte aligned: the scratch is 256-byte aligned
      split.acc = mem + 2 * slots;
    }
    const dim3 split_grid(grid.x, grid.y, static_cast<unsigned>(splits));
    warp_kernel<<<split_grid, kThreads, 0, stream>>>(p.q, k_cache, v_cache, tokens, block_tables, p.num_heads,
                                                     p.num_kv_heads, p.head_dim, p.cache.block_size, p.scale, split,
                                                     p.out);
    LS_CUDA_CHECK_LAUNCH();
    if (splits > 1) {
      MergeSplitsKernel<<<grid, kThreads, 0, stream>>>(tokens, p.num_heads, p.num_kv_heads, p.head_dim, splits, split,
                                                      p.out);
      LS_CUDA_CHECK_LAUNCH();
    }
    return;
  }
  const size_t smem =
      (2 * static_cast<size_t>(group) * p.head_dim + static_cast<size_t>(group) * kTile + 3 * group) * sizeof(float);
  if (smem > 48 * 1024) {
    int device = 0, limit = 0;
    LS_CUDA_CHECK(cudaGetDevice(&device));
    LS_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    LS_CUDA_REQUIRE(smem <= static_cast<size_t>(limit), "PagedAttention: query group too large for shared memory");
    LS_CUDA_CHECK(cudaFuncSetAttribute(TiledAttentionKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
  }
  TiledAttentionKernel<T><<<grid, kThreads, smem, stream>>>(p.q, k_cache, v_cache, tokens, block_tables, p.num_heads,
                                                            p.num_kv_heads, p.head_dim, p.cache.block_size, p.scale,
                                                            p.sliding_window, p.out);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace

// Writes the new K/V into the paged cache, then causal GQA attention for every new token (tokens
// and block_tables from FlattenAttentionSeqs, uploaded; max_context what it returned). With
// `split_scratch`, a step of few tokens over long contexts divides each context among several
// blocks (split-K over positions, as in flash-decoding) and merges their partial softmaxes in a
// second kernel, so that the whole device works on it.
static void PagedAttention(const AttentionParams& p, const AttentionToken* tokens, int32_t num_tokens,
                           const int32_t* block_tables, int32_t max_context, DeviceScratch* split_scratch,
                           cudaStream_t stream) {
  if (num_tokens == 0) return;
  LS_CUDA_REQUIRE(p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0,
                  "PagedAttention: num_heads must be a multiple of num_kv_heads");
  LS_CUDA_REQUIRE(p.cache.dtype == DType::kF32 || p.cache.dtype == DType::kBF16,
                  "PagedAttention: the CUDA kernels keep a float32 or BF16 KV cache");
  if (p.cache.dtype == DType::kBF16) {
    PagedAttentionOf<__nv_bfloat16>(p, tokens, num_tokens, block_tables, max_context, split_scratch, stream);
  } else {
    PagedAttentionOf<float>(p, tokens, num_tokens, block_tables, max_context, split_scratch, stream);
  }
}

}  // namespace ls::cuda

// CudaBackend::PagedAttention: the op on the backend's stream.
namespace ls {

CudaBackend::UploadedSeqs CudaBackend::UploadAttentionSeqs(const AttentionParams& p) {
  UploadedSeqs u;
  u.max_context = cuda::FlattenAttentionSeqs(p, &attention_tokens_, &attention_tables_);
  u.num_tokens = static_cast<int32_t>(attention_tokens_.size());
  if (u.num_tokens == 0) return u;
  u.tokens = uploader_->Upload(attention_tokens_.data(), attention_tokens_.size());
  u.tables = uploader_->Upload(attention_tables_.data(), attention_tables_.size());
  return u;
}

CudaBackend::UploadedSeqs CudaBackend::UploadAttentionSeqs(const LatentAttentionParams& p) {
  AttentionParams seqs;
  seqs.seqs = p.seqs;
  seqs.num_seqs = p.num_seqs;
  return UploadAttentionSeqs(seqs);
}

void CudaBackend::PagedAttention(const AttentionParams& p) {
  Activate();
  const UploadedSeqs u = UploadAttentionSeqs(p);
  if (u.num_tokens == 0) return;
  cuda::PagedAttention(p, u.tokens, u.num_tokens, u.tables, u.max_context, &attention_split_, stream_);
}

}  // namespace ls
