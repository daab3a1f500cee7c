// The CPU backend's ops as free functions (one .cc per op family): one per entry of kernels/ops.def,
// with the thread pool first (the GEMMs' contracts are in gemm.h). They are the reference the CUDA
// ops are checked against. All activations are float32; weights F32/BF16/F16.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "kernels/tensor.h"
#include "kernels/thread_pool.h"

namespace ls::cpu {

// One function per op of kernels/ops.def: cpu::name(pool, the op's parameters...).
#define LS_OP(name, params, args) void name(ThreadPool& pool, LS_UNPARENTHESIZED params);
#include "kernels/ops.def"
#undef LS_OP
// CombineExpertOutputs over rows picked by index: out[t] = Σ_k weights[t, k] · y[rows[t * K + k]]
// in k order (rows: null = t * K + k).
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
