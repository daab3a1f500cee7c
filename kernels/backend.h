// Backend: the ops a model step is built from, implemented once per device (kernels/cpu,
// kernels/cuda). Ops know tensors and shapes, never requests or sequences. Activations, weights
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

  // A model hands each weight (row-major, host memory) to the backend once, at load.
  // PreparedWeightBytes: the backend memory it needs for `use`; 0 means the ops read the host
  // tensor in place. PrepareWeight writes it into `dst` (that many bytes, from Allocate) and
  // returns the view the ops take; with 0 bytes it returns `w` itself. A quantized matmul weight
  // (Tensor::quant) is accepted in every format of kernels/quantized_weight.h; the view returned
  // keeps everything it needs (codes, scales, zero points) inside those bytes.
  virtual size_t PreparedWeightBytes(const Tensor& w, WeightUse use) const = 0;
  virtual Tensor PrepareWeight(const Tensor& w, WeightUse use, void* dst) = 0;

  // out[t] = table[ids[t]] as float32.                                 out: [T, d]
  virtual void Embedding(const int32_t* ids, int64_t num_tokens, const Tensor& table, float* out) = 0;
  // out[r] = x[r] / sqrt(mean(x[r]²) + eps) · w over rows of width w.cols; in place allowed.
  virtual void RmsNorm(const float* x, int64_t rows, const Tensor& w, float eps, float* out) = 0;
  // y[M, N] (+)= x[M, K] · w[N, K]ᵀ.
  virtual void Gemm(const float* x, int64_t M, const Tensor& w, float* y, bool accumulate) = 0;
  // Several GEMMs over the same input (the q, k and v projections of one norm's output), each
  // with Gemm's result; a backend may run them as one launch. The outputs must not overlap x.
  virtual void GemmMany(const float* x, int64_t M, const GemmOutput* outs, int32_t n) {
    for (int32_t i = 0; i < n; ++i) Gemm(x, M, *outs[i].w, outs[i].y, outs[i].accumulate);
  }
  // RoPE in place on x[T, num_heads * head_dim] at positions[T] (host memory).
  virtual void Rope(float* x, int64_t num_tokens, const int32_t* positions, const RopeParams& p) = 0;
  // y[r] += bias for rows of width bias.cols (a bias vector, F32, BF16 or F16).
  virtual void AddBias(float* y, int64_t rows, const Tensor& bias) = 0;
  // x[r, i] *= σ(gate[r, i]) (gate_width == width) or σ(gate[r, 0]) (gate_width == 1).
  //                                                       x: [rows, width]  gate: [rows, gate_width]
  virtual void MulSigmoid(float* x, int64_t rows, int64_t width, const float* gate, int64_t gate_width) = 0;
  // Whether PagedAttention reads and writes a KV cache of this element type (float32 always).
  virtual bool SupportsKvCacheDType(DType dtype) const { return dtype == DType::kF32; }
  // Writes the new K/V into the cache, then causal GQA attention for every new token.
  virtual void PagedAttention(const AttentionParams& p) = 0;
  // Writes the new latent rows into the cache, then causal latent attention (MLA) for every new
  // token.
  virtual void PagedLatentAttention(const LatentAttentionParams& p) = 0;
  // MLA's expanded form, the ops around the caller's per-head expansion: StoreLatentRows writes
  // the new latent rows of p.seqs into the cache as PagedLatentAttention does, attending nothing
  // (it reads c_new, k_rope_new, latent_dim, rope_dim, cache and seqs); LoadLatentRows reads
  // `count` cached rows of `seq` from position `first` as float32 rows of `width` values
  // ([count, width]); ExpandedLatentAttention attends one sequence's tokens to one tile of keys.
  virtual void StoreLatentRows(const LatentAttentionParams& p) = 0;
  virtual void LoadLatentRows(const KvLayer& cache, int32_t width, const AttentionSeq& seq, int32_t first,
                              int32_t count, float* out) = 0;
  virtual void ExpandedLatentAttention(const ExpandedLatentAttentionParams& p) = 0;
  // The short causal convolution of linear-attention layers (ShortConvParams).
  virtual void ShortConv(const ShortConvParams& p) = 0;
  // Kimi Delta Attention over the sequences' recurrent state (KdaParams).
  virtual void KdaAttention(const KdaParams& p) = 0;
  // One GEMM per head: y[t, h, 0:w[h].rows] = x[t, h, 0:w[h].cols] · w[h]ᵀ for t < num_tokens and
  // h < heads, with x[t, h] at x + t·x.token + h·x.head and y[t, h] at y + t·y.token + h·y.head
  // (x.head = 0: every head reads the token's one row).
  virtual void HeadGemm(const float* x, RowStrides xs, int64_t num_tokens, int32_t heads, const Tensor* w, float* y,
                        RowStrides ys) = 0;
  // out[r, i] = act(gate[r, i]) · up[r, i] for rows of width `width`.
  virtual void GluActivation(const float* gate, const float* up, int64_t rows, int64_t width,
                             GluAct act, float* out) = 0;
  // Scores, biased top-K selection and weights for every token.
  virtual void Router(const RouterParams& p) = 0;
  // Routed experts, grouped by expert: permute, one GEMM per active expert, weighted combine.
  virtual void MoeExperts(const MoeParams& p) = 0;
  // out[t] = Σ_k weights[t, k] · y[t * K + k] in k order: the combine of expert outputs.
  //                                         y: [T * K, width]  weights: [T, K]  out: [T, width]
  virtual void CombineExpertOutputs(const float* y, const float* weights, int64_t T, int32_t K, int64_t width,
                                    float* out) = 0;
  // x[i] += y[i].
  virtual void Add(float* x, const float* y, int64_t n) = 0;
  // dst[i] = src[i] for i < n (backend memory, not overlapping); x[i] = 0 for i < n.
  virtual void Copy(float* dst, const float* src, int64_t n) = 0;
  virtual void SetZero(float* x, int64_t n) = 0;
  // Attention residuals' mix of block residuals (AttnResParams).
  virtual void AttnResMix(const AttnResParams& p) = 0;
  // Row moves of expert-parallel dispatch and combine, rows of `width` floats (rows: host memory):
  // gather dst[i] = src[rows[i]], scatter dst[rows[i]] = src[i], for i < n.
  virtual void GatherRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) = 0;
  virtual void ScatterRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) = 0;
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
};

}  // namespace ls
