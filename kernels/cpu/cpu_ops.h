// The CPU backend's ops as free functions (one .cc per op family). They are the reference the
// CUDA ops are checked against. All activations are float32; weights F32/BF16/F16.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "kernels/tensor.h"
#include "kernels/thread_pool.h"

namespace ls::cpu {

void Embedding(ThreadPool& pool, const int32_t* ids, int64_t num_tokens, const Tensor& table, float* out);
void RmsNorm(ThreadPool& pool, const float* x, int64_t rows, const Tensor& w, float eps, float* out);
void Rope(ThreadPool& pool, float* x, int64_t num_tokens, const int32_t* positions, const RopeParams& p);
void AddBias(ThreadPool& pool, float* y, int64_t rows, const Tensor& bias);
void AttnResMix(ThreadPool& pool, const AttnResParams& p);
void MulSigmoid(ThreadPool& pool, float* x, int64_t rows, int64_t width, const float* gate, int64_t gate_width);
void PagedAttention(ThreadPool& pool, const AttentionParams& p);
void PagedLatentAttention(ThreadPool& pool, const LatentAttentionParams& p);
void StoreLatentRows(ThreadPool& pool, const LatentAttentionParams& p);
void LoadLatentRows(ThreadPool& pool, const KvLayer& cache, int32_t width, const AttentionSeq& seq, int32_t first,
                    int32_t count, float* out);
void ExpandedLatentAttention(ThreadPool& pool, const ExpandedLatentAttentionParams& p);
void ShortConv(ThreadPool& pool, const ShortConvParams& p);
void KdaAttention(ThreadPool& pool, const KdaParams& p);
void GluActivation(ThreadPool& pool, const float* gate, const float* up, int64_t rows, int64_t width,
                   GluAct act, float* out);
void Router(ThreadPool& pool, const RouterParams& p);
void MoeExperts(ThreadPool& pool, const MoeParams& p);
// out[t] = Σ_k weights[t, k] · y[rows[t * K + k]] in k order (rows: null = t * K + k).
void CombineExpertOutputs(ThreadPool& pool, const float* y, const int64_t* rows, const float* weights, int64_t T,
                          int32_t K, int64_t width, float* out);

// Scalar gate functions, shared by the ops and tests.
float Sigmoid(float x);
float SiTU(float x);  // sigmoid(x) · tanh(x)
float SiLU(float x);  // x · sigmoid(x)
// The general SiTU of a GLU pair: β·tanh(g/β)·σ(g) · γ·tanh(u/γ) (γ = 0: u unbounded).
float SiTU(float g, float u, float beta, float linear_beta);

// Per-token top-K of scores + bias, best first, ties to the lower expert index.
void SelectTopK(const float* scores, const float* bias, int32_t n, int32_t k, int32_t* ids);
// Selection keys score + bias of one token under group-limited routing: experts outside the
// topk_group groups ranked best by `rank` (ties: lower group) get -inf.
void GroupLimitedKeys(const float* scores, const float* bias, int32_t n, int32_t n_group, int32_t topk_group,
                      GroupScore rank, std::vector<float>* keys);

}  // namespace ls::cpu
