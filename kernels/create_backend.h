// CreateBackend: the compute backend a binary runs on, chosen by name ("cpu", the default, or
// "cuda" in builds with the CUDA kernels), so that the server and tools share one switch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace ls {

struct BackendOptions {
  std::string name = "cpu";
  int threads = 0;      // CPU worker threads (0: one per hardware thread)
  int cuda_device = 0;  // CUDA device index
  // The GEMMs' activation type (--activation_dtype): "auto" (the CPU float32; CUDA bfloat16, and
  // FP8 block-scaled checkpoints' dense GEMMs in FP8 where the device runs them), "float32" (CPU
  // only), "bfloat16" (the CPU rounds the input rows of BF16 weights' GEMMs; CUDA runs every
  // dense GEMM in BF16) or "int8" (CPU only: the input rows of int8 and int4 weights'
  // GEMMs rounded to int8 per row, integer dot products).
  std::string activation_dtype = "auto";
  // The SIMD target the CPU kernels may use at most (--cpu_isa): "auto" (the best this CPU runs,
  // or the LS_CPU_ISA environment variable's) or a target name (kernels/cpu/simd/targets.def).
  // The CPU kernels serve the CUDA backend's host side too.
  std::string cpu_isa = "auto";
};

// The CPU kernels' instruction sets in use ("avx512+avx512_vnni+avx512_bf16"), for the ready line.
std::string CpuIsaName();

// The activation type the options give ("auto" resolved for the backend named).
std::string ActivationDtypeName(const BackendOptions& options);

// The backends this build can create.
std::vector<std::string> AvailableBackends();

// Null with *error set (naming the backend and why) when it cannot be created.
std::unique_ptr<Backend> CreateBackend(const BackendOptions& options, std::string* error);

}  // namespace ls
