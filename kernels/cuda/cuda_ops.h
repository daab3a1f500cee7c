// What the CUDA backend's op files share. Each op of kernels/ops.def is defined in its own file as
// a CudaBackend member and its kernels, file-local, and is tested through the Backend interface.
// Here: the device count, the kernels more than one op launches (the float32 → BF16 conversion of
// the GEMMs' inputs, the combine of expert outputs), the launchers the kernel benchmark times
// outside a backend, the step's sequences flattened as the attention and recurrent kernels read
// them, and an MoE layer's expert weights as the grouped GEMMs read them. Every pointer is device
// memory unless marked host, and every launch is queued on `stream` without waiting for it. This
// header is plain C++ so host code and tests compile without nvcc.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/device_scratch.h"
#include "kernels/cuda/grouped_gemm.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"

typedef struct CUstream_st* cudaStream_t;

namespace ls::cuda {

// Number of CUDA devices usable by this process (0 when there is no driver or device).
int DeviceCount();

// out[i] = x[i] rounded to BF16 (nearest even), as raw BF16 bits.
void ConvertToBf16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream);

// Launchers that bench/moe_kernels.cu also times on its own stream and in graphs, outside a
// backend: RMSNorm (rows of width w.cols; in place allowed), the GLU activation and the router
// (p.logits, p.bias or null, p.topk_ids and p.topk_weights device memory; ties to the lower index).
void RmsNorm(const float* x, int64_t rows, const Tensor& w, float eps, float* out, cudaStream_t stream);
void GluActivation(const float* gate, const float* up, int64_t rows, int64_t width, GluAct act, float* out,
                   cudaStream_t stream);
void Router(const RouterParams& p, cudaStream_t stream);

// out[t] = Σ_k weights[t, k] · y[rows[t * K + k]] in k order (rows: null = t * K + k).
//                                              weights: [T, K]  y: [*, width]  out: [T, width]
void CombineExpertOutputs(const float* y, const int32_t* rows, const float* weights, int64_t T, int32_t K,
                          int64_t width, float* out, cudaStream_t stream);

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

// The routed experts' three stages (MoeParams.gate/up/down and tokens_per_expert are not read;
// experts gives the weights), which CudaBackend::MoeExperts runs in order and the kernel benchmark
// times one by one (kernels/cuda/moe.cu).
struct MoeScratch;
void MoePermute(const MoeParams& p, MoeScratch& scratch, cudaStream_t stream);
void MoeGroupedGemms(const MoeParams& p, const ExpertTable& experts, MoeScratch& scratch, cudaStream_t stream);
void MoeCombine(const MoeParams& p, MoeScratch& scratch, cudaStream_t stream);

}  // namespace ls::cuda
