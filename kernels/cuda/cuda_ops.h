// The CUDA backend's ops, twins of the kernels/cpu ops (same parameter meaning). Every pointer is
// device memory unless marked host, and every op is queued on `stream` without waiting for it.
// Weights read by the cuBLASLt GEMMs are BF16 row-major, the routed experts' BF16 or quantized
// (grouped_gemm.h); other weights may be F32, BF16 or F16.
// This header is plain C++ so host code and tests compile without nvcc.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/device_scratch.h"
#include "kernels/cuda/grouped_gemm.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"

typedef struct CUstream_st* cudaStream_t;

namespace ls::cuda {

struct MoeScratch;

// Number of CUDA devices usable by this process (0 when there is no driver or device).
int DeviceCount();

// out[t] = table[ids[t]] as float32.                                    out: [T, table.cols]
void Embedding(const int32_t* ids, int64_t num_tokens, const Tensor& table, float* out, cudaStream_t stream);

// out[r] = x[r] / sqrt(mean(x[r]²) + eps) · w, rows of width w.cols; in place allowed.
void RmsNorm(const float* x, int64_t rows, const Tensor& w, float eps, float* out, cudaStream_t stream);

// RoPE in place on x[T, num_heads * head_dim] at positions[T] (device), with `inv_freq` the
// device copy of p.inv_freq [rotary_dim / 2].
void Rope(float* x, int64_t num_tokens, const int32_t* positions, const RopeParams& p, const float* inv_freq,
          cudaStream_t stream);
// y[r] += bias over rows of width bias.cols (bias: device memory, F32, BF16 or F16).
void AddBias(float* y, int64_t rows, const Tensor& bias, cudaStream_t stream);
// x[r, i] *= σ(gate[r, gate_width == 1 ? 0 : i]).
void MulSigmoid(float* x, int64_t rows, int64_t width, const float* gate, int64_t gate_width, cudaStream_t stream);

// out[r, i] = act(gate[r, i]) · up[r, i] over rows × width elements.
void GluActivation(const float* gate, const float* up, int64_t rows, int64_t width, GluAct act, float* out,
                   cudaStream_t stream);

// x[i] += y[i].
void Add(float* x, const float* y, int64_t n, cudaStream_t stream);
// The attention residuals' mix (AttnResParams), one block per token.
void AttnResMix(const AttnResParams& p, cudaStream_t stream);
// dst[i] = src[rows[i]] / dst[rows[i]] = src[i] for i < n, rows of `width` floats; rows: device.
void GatherRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst, cudaStream_t stream);
void ScatterRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst, cudaStream_t stream);

// ids[r] = the first column of row r's largest value, logprob[r] (when not null) its log-softmax.
void ArgmaxRows(const float* x, int64_t rows, int64_t cols, int32_t* ids, float* logprob, cudaStream_t stream);

// out[i] = x[i] rounded to BF16 (nearest even), as raw BF16 bits.
void ConvertToBf16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream);

// out[t] = Σ_k weights[t, k] · y[rows[t * K + k]] in k order (rows: null = t * K + k).
//                                              weights: [T, K]  y: [*, width]  out: [T, width]
void CombineExpertOutputs(const float* y, const int32_t* rows, const float* weights, int64_t T, int32_t K,
                          int64_t width, float* out, cudaStream_t stream);

// Scores, biased top-K (ties to the lower index) and weights from the unbiased scores for every
// token; p.logits, p.bias (or null), p.topk_ids and p.topk_weights are device memory.
void Router(const RouterParams& p, cudaStream_t stream);

// One new token of a step, as the attention kernels see it.
struct AttentionToken {
  int32_t row = 0;    // row of q, k_new, v_new and out
  int32_t pos = 0;    // its position; it attends to positions 0 .. pos of its sequence
  int32_t table = 0;  // offset of its sequence's block table in the step's concatenated tables
};
// Flattens p.seqs and their block tables (host memory) into one entry per new token and the
// tables laid end to end; both are host vectors the caller uploads. Returns the longest context
// (positions attended) of any token.
int32_t FlattenAttentionSeqs(const AttentionParams& p, std::vector<AttentionToken>* tokens,
                             std::vector<int32_t>* tables);
// Writes the new K/V into the paged cache, then causal GQA attention for every new token. p.seqs
// is not read: tokens[num_tokens] and block_tables come from FlattenAttentionSeqs, uploaded, and
// max_context is what it returned. With `split` scratch, a step of few tokens over long contexts
// divides each context among several blocks (split-K over positions, as in flash-decoding) and
// merges their partial softmaxes in a second kernel, so that the whole device works on it.
void PagedAttention(const AttentionParams& p, const AttentionToken* tokens, int32_t num_tokens,
                    const int32_t* block_tables, int32_t max_context, DeviceScratch* split, cudaStream_t stream);

// Writes the new latent rows into the paged latent cache, then latent attention (MLA, absorbed)
// for every new token; tokens and block_tables as for PagedAttention (FlattenAttentionSeqs over
// the same sequences).
void PagedLatentAttention(const LatentAttentionParams& p, const AttentionToken* tokens, int32_t num_tokens,
                          const int32_t* block_tables, cudaStream_t stream);
// MLA's expanded form: StoreLatentRows writes the new latent rows only (tokens and block_tables
// as above); LoadLatentRows copies `count` cache rows of `width` floats of one sequence, from
// position `first`, into out [count, width] (block_table: that sequence's table on the device);
// ExpandedLatentAttention attends p.seq's tokens to one tile of expanded keys and values.
void StoreLatentRows(const LatentAttentionParams& p, const AttentionToken* tokens, int32_t num_tokens,
                     const int32_t* block_tables, cudaStream_t stream);
void LoadLatentRows(const KvLayer& cache, int32_t width, const int32_t* block_table, int32_t first, int32_t count,
                    float* out, cudaStream_t stream);
void ExpandedLatentAttention(const ExpandedLatentAttentionParams& p, cudaStream_t stream);

// The step's sequences and tokens as the recurrent layers' kernels read them (device copies of
// what FlattenRecurrentSeqs builds on the host).
struct RecurrentSeq {
  int32_t first_row = 0;   // the sequence's first row among the step's tokens
  int32_t num_tokens = 0;
  int32_t slot = 0;        // its state slot
  int32_t fresh = 0;       // 1: the state starts from zero (start_pos 0)
};
struct RecurrentToken {
  int32_t first_row = 0;  // its sequence's first row
  int32_t index = 0;      // its index among the sequence's new tokens
  int32_t slot = 0;
  int32_t fresh = 0;
};
void FlattenRecurrentSeqs(const AttentionSeq* seqs, int32_t num_seqs, std::vector<RecurrentSeq>* out_seqs,
                          std::vector<RecurrentToken>* out_tokens);
// ShortConvParams with the tokens and sequences flattened and uploaded (p.seqs is not read).
void ShortConv(const ShortConvParams& p, const RecurrentToken* tokens, int32_t num_tokens, const RecurrentSeq* seqs,
               cudaStream_t stream);
// KdaParams (recurrent form) with the sequences flattened and uploaded (p.seqs is not read);
// p.num_seqs of them.
void KdaAttention(const KdaParams& p, const RecurrentSeq* seqs, cudaStream_t stream);

// HeadGemm's row moves: out[h, t, 0:width] = BF16(x[t, h, 0:width]) (x through its strides), and
// y[t, h, 0:width] = in[h, t, 0:width] (y through its strides).
void GatherHeadRowsBf16(const float* x, RowStrides xs, int64_t T, int32_t heads, int64_t width, uint16_t* out,
                        cudaStream_t stream);
void ScatterHeadRows(const float* in, int64_t T, int32_t heads, int64_t width, float* y, RowStrides ys,
                     cudaStream_t stream);

// One MoE layer's expert weights as the grouped GEMMs read them (grouped_gemm.h): for each of
// gate, up and down, a device array of N descriptions (BF16 or codes and scales, row-major).
struct ExpertTable {
  ExpertMatrices gate;  // [N] → [width, in_width]
  ExpertMatrices up;    // [N] → [width, in_width]
  ExpertMatrices down;  // [N] → [out_width, width]
  int64_t width = 0;    // f, the experts' intermediate width
  // Every matrix F8_E4M3 in 128 × 128 blocks with widths multiples of 16: MoeGroupedGemms may run
  // the FP8 grouped GEMMs (the inputs rounded to e4m3 per 128 values) when fp8 is set.
  bool fp8_blocks = false;
  bool fp8 = false;
};

// Routed experts (MoeParams.gate/up/down and tokens_per_expert are not read; experts gives the
// weights). The three stages, in order; MoeExperts runs all three. The rows routed to each expert
// are left in scratch.counts() (int32 [N]) until the next call.
// 1. Counts and offsets per expert, the permutation (pairs grouped by expert, token order inside
//    a group) and the permuted inputs in BF16.
void MoePermute(const MoeParams& p, MoeScratch& scratch, cudaStream_t stream);
// 2. Per active expert: act = GLU(z·gateᵀ, z·upᵀ) in one grouped GEMM, then y = act·downᵀ
//    (experts.fp8: z and act rounded to e4m3 per row and 128 columns, the FP8 grouped GEMMs).
void MoeGroupedGemms(const MoeParams& p, const ExpertTable& experts, MoeScratch& scratch, cudaStream_t stream);
// 3. out[t] = Σ_k w[t, k] · y[slot of (t, k)] in k order.
void MoeCombine(const MoeParams& p, MoeScratch& scratch, cudaStream_t stream);
void MoeExperts(const MoeParams& p, const ExpertTable& experts, MoeScratch& scratch, cudaStream_t stream);

}  // namespace ls::cuda
