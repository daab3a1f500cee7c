// Backend: the ops a model step is built from, implemented once per device (kernels/cpu,
// kernels/cuda). The compute ops are listed once, in kernels/ops.def. Ops know tensors and shapes, never requests or sequences. Activations, weights
// and router outputs are memory of this backend; the step's integer metadata (token ids,
// positions, AttentionSeq and block tables) is host memory that the backend uploads as it needs.
// A backend instance is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ops.h"
#include "kernels/rank_transport.h"
#include "kernels/tensor.h"

namespace ls {

class ThreadPool;

// What a weight is read by, which decides the layout and memory a backend keeps it in (and what
// online quantization does with it).
enum class WeightUse : uint8_t {
  kMatmul,        // the right operand of Gemm
  kMatmulExpert,  // a routed expert's gate, up or down matrix, read by MoeExperts only (a backend may
                  // keep it in a form its grouped GEMMs read, e.g. quantized codes and scales)
  kMatmulRouter,  // a Gemm operand online quantization leaves as stored: routers and gates, whose
                  // few outputs decide which experts run
  kMatmulHead,    // the LM head, a Gemm operand online quantization keeps at 8 bits
  kOther,         // norm weights, the embedding table, the router bias: read as stored
};
inline bool IsMatmul(WeightUse use) { return use != WeightUse::kOther; }

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // Scratch memory for activations, owned by the caller until Free.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* p) = 0;
  virtual void CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual void CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  // Waits until every op queued so far has finished and the host results it promises (the counts
  // of MoeParams::tokens_per_expert) are in place. CopyToHost does the same before it returns.
  virtual void Synchronize() {}
  // A model step's ops are about to be issued (a hint: a backend may wake its workers).
  virtual void BeginStep() {}
  // The device memory this backend allocates from, free and total bytes, where it has a memory of
  // its own (a GPU's, taken by every process on it); false for host memory.
  virtual bool DeviceMemory(size_t* /*free_bytes*/, size_t* /*total_bytes*/) const { return false; }

  // A model hands each weight (row-major, host memory) to the backend once, at load.
  // PreparedWeightBytes: the backend memory it needs for `use`; 0 means the ops read the host
  // tensor in place. PrepareWeight writes it into `dst` (that many bytes, from Allocate) and
  // returns the view the ops take; with 0 bytes it returns `w` itself. A quantized matmul weight
  // (Tensor::quant) is accepted in every format of kernels/quantized_weight.h; the view returned
  // keeps everything it needs (codes, scales, zero points) inside those bytes.
  virtual size_t PreparedWeightBytes(const Tensor& w, WeightUse use) const = 0;
  virtual Tensor PrepareWeight(const Tensor& w, WeightUse use, void* dst) = 0;
  // The host threads this backend computes with, which a model may borrow at load for host-side
  // work on its weights (online quantization); null where the backend has none.
  virtual ThreadPool* HostThreads() { return nullptr; }

  // The compute ops (kernels/ops.def), pure virtual.
#define LS_OP(name, params, args) virtual void name params = 0;
#include "kernels/ops.def"
#undef LS_OP
  // Several GEMMs over the same input (the q, k and v projections of one norm's output), each
  // with Gemm's result; a backend may run them as one launch. The outputs must not overlap x.
  virtual void GemmMany(const float* x, int64_t M, const GemmOutput* outs, int32_t n) {
    for (int32_t i = 0; i < n; ++i) Gemm(x, M, *outs[i].w, outs[i].y, outs[i].accumulate);
  }
  // Whether PagedAttention reads and writes a KV cache of this element type (float32 always).
  virtual bool SupportsKvCacheDType(DType dtype) const { return dtype == DType::kF32; }

  // The transport between the ranks (processes) of an expert-parallel group: send_rows[p] rows go
  // to rank p (blocks laid out rank by rank in `send`) and recv_rows[p] rows arrive from rank p
  // (rank by rank in `recv`), rows of `width` floats; every rank calls it together. A process
  // alone (no group joined) is the group's only rank: the CPU backend copies, the CUDA backend
  // runs an NCCL all-to-all with itself. In a group, the CPU backend moves the rows over the
  // group's transport (MPI all-to-all-v) and the CUDA backend over NCCL, bootstrapped through it.
  virtual void ExchangeRows(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                            const std::vector<int64_t>& recv_rows, int64_t width) = 0;
  // Makes this backend one rank of `group` (which outlives it) for ExchangeRows; collective (every
  // rank calls it at start-up). False with *error set when the backend cannot join.
  virtual bool JoinRankGroup(RankTransport* group, std::string* error) = 0;

  // Tensor parallelism: the ranks of `group` (which outlives the backend) hold parts of the same
  // weights and run the same tokens. AllReduceSum sums x[0, n) over them in place (backend
  // memory); AllGather puts every rank's n floats of `send` into recv, rank by rank ([size][n]).
  // Every rank of the group calls them together. Alone (no group joined) the sum is x itself and
  // the gather a copy. The CPU backend moves the values over the group's transport (MPI), the CUDA
  // backend over NCCL, bootstrapped through it. A failure sticks in the group.
  virtual bool JoinTensorGroup(RankTransport* group, std::string* error) = 0;
  virtual void AllReduceSum(float* x, int64_t n) = 0;
  virtual void AllGather(const float* send, int64_t n, float* recv) = 0;
};

}  // namespace ls
