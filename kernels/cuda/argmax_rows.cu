// CUDA ArgmaxRows: greedy decoding's reduction of logits rows on the device, so that only an id
// (and a log-probability) per row crosses to the host. One block per row: each thread keeps the
// best value and its first column over a strided slice and an online log-sum-exp (running
// maximum and the sum of exponentials below it); CUB merges the threads' states. Twin of
// kernels/cpu/argmax_rows.cc (which sums in double: the log-probabilities agree to float
// rounding, the ids exactly).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cub/block/block_reduce.cuh>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace ls::cuda {
namespace {

constexpr int kThreads = 512;

struct RowState {
  float best;  // the largest value seen (NaN never taken)
  int32_t id;  // its first column; INT_MAX while none
  float max;   // running maximum of the log-sum-exp
  float sum;   // Σ exp(value − max) over the values seen
};

__device__ __forceinline__ RowState Merge(const RowState& a, const RowState& b) {
  RowState r;
  const bool take_b = b.best > a.best || (b.best == a.best && b.id < a.id);
  r.best = take_b ? b.best : a.best;
  r.id = take_b ? b.id : a.id;
  if (b.sum == 0.f) {
    r.max = a.max, r.sum = a.sum;
  } else if (a.sum == 0.f) {
    r.max = b.max, r.sum = b.sum;
  } else {
    r.max = fmaxf(a.max, b.max);
    r.sum = a.sum * expf(a.max - r.max) + b.sum * expf(b.max - r.max);
  }
  return r;
}

struct MergeOp {
  __device__ __forceinline__ RowState operator()(const RowState& a, const RowState& b) const { return Merge(a, b); }
};

__global__ void ArgmaxRowsKernel(const float* __restrict__ x, int64_t cols, int32_t* __restrict__ ids,
                                 float* __restrict__ logprob) {
  using Reduce = cub::BlockReduce<RowState, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  RowState s{-INFINITY, INT_MAX, -INFINITY, 0.f};
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
    const float v = row[i];
    if (v > s.best || (v == s.best && i < s.id)) s.best = v, s.id = static_cast<int32_t>(i);
    if (logprob && v != -INFINITY && v == v) {  // NaN left out, as the CPU's LogSumExpRow does
      if (s.sum == 0.f || v > s.max) {
        s.sum = s.sum * (s.sum == 0.f ? 0.f : expf(s.max - v)) + 1.f;
        s.max = v;
      } else {
        s.sum += expf(v - s.max);
      }
    }
  }
  const RowState all = Reduce(tmp).Reduce(s, MergeOp());
  if (threadIdx.x == 0) {
    // No value above −∞ (NaN or −∞ throughout): no id, as ArgmaxRow.
    const int32_t id = all.id == INT_MAX || all.best == -INFINITY ? -1 : all.id;
    ids[blockIdx.x] = id;
    if (logprob) logprob[blockIdx.x] = id < 0 ? __int_as_float(0x7fc00000) : row[id] - (all.max + logf(all.sum));
  }
}

}  // namespace

static void ArgmaxRows(const float* x, int64_t rows, int64_t cols, int32_t* ids, float* logprob, cudaStream_t stream) {
  for (int64_t first = 0; first < rows; first += 65535) {
    const int64_t count = std::min<int64_t>(65535, rows - first);
    ArgmaxRowsKernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(x + first * cols, cols, ids + first,
                                                                            logprob ? logprob + first : nullptr);
    LS_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace ls::cuda

// CudaBackend::ArgmaxRows: the op on the backend's stream.
namespace ls {

void CudaBackend::ArgmaxRows(const float* x, int64_t rows, int64_t cols, int32_t* ids, float* logprob) {
  if (rows == 0) return;
  Activate();
  cuda::ArgmaxRows(x, rows, cols, ids, logprob, stream_);
}

}  // namespace ls
