// Device-side scalar helpers shared by the CUDA kernels: loads of F32/BF16/F16 values as float32
// (twins of LoadAsF32 in kernels/dtype.h) and the GLU gate functions (twins of cpu::SiTU/SiLU).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/dtype.h"
#include "kernels/ops.h"

namespace ls::cuda {

template <typename W>
__device__ inline float ToF32(W v) {
  if constexpr (std::is_same_v<W, float>) {
    return v;
  } else if constexpr (std::is_same_v<W, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return __half2float(v);
  }
}

// A float32 value stored as W (BF16: rounded to nearest even, as F32ToBf16 on the host).
template <typename W>
__device__ inline W FromF32(float v) {
  if constexpr (std::is_same_v<W, float>) {
    return v;
  } else {
    static_assert(std::is_same_v<W, __nv_bfloat16>);
    return __float2bfloat16_rn(v);
  }
}

// Element i of a buffer of F32, BF16 or F16 values, as float32.
__device__ inline float LoadWeight(const void* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(base)[i];
    case DType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    default: return __half2float(static_cast<const __half*>(base)[i]);
  }
}

__device__ inline float Sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// act(g): SiTU(g) = sigmoid(g) · tanh(g), or SiLU(g) = g · sigmoid(g).
__device__ inline float GluGate(Activation act, float g) {
  return act == Activation::kSiTU ? Sigmoid(g) * tanhf(g) : g * Sigmoid(g);
}

// One GLU value act(g, u): the plain gates times u, or the general SiTU
// β·tanh(g/β)·σ(g) · γ·tanh(u/γ).
__device__ inline float GluValue(const GluAct& act, float g, float u) {
  if (act.plain()) return GluGate(act.kind, g) * u;
  const float up = act.linear_beta > 0.f ? act.linear_beta * tanhf(u / act.linear_beta) : u;
  return act.beta * tanhf(g / act.beta) * Sigmoid(g) * up;
}

}  // namespace ls::cuda
