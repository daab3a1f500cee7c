// The CPU's instruction sets and the SIMD targets the CPU kernels are compiled for. Every kernel
// of kernels/cpu/simd/kernels.def is compiled once per target (each in its own namespace, so no
// code built for a wider instruction set is reachable except through the dispatch); at start-up
// the dispatch takes, kernel by kernel, the best target this CPU runs (kernel_table.h). A cap
// (the server's --cpu_isa, tests' forced targets) limits the choice to a target and those below
// it, so that narrower paths run and are checked on a wider CPU too.
// Owns nothing; the feature probe runs once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ls::cpu {

// In order of preference within an architecture (a later one is chosen over an earlier one when
// the CPU has it and the cap allows it). A target compiles the kernel families its instructions
// speed up: the base targets (portable, avx2, avx512, neon) all of them, the others only their
// own family (int8 dot products, BF16 dot products).
enum class SimdTarget : int {
  kPortable = 0,    // any CPU: plain C++ (fused multiply-adds inlined, never a libm call)
  kAvx2 = 1,        // x86-64 AVX2 + FMA + F16C (Haswell, Zen 1 and later)
  kAvx2Vnni = 2,    // + AVX-VNNI (Alder Lake, Zen 5): int8 dot products
  kAvx512 = 3,      // AVX-512 F/BW/VL/DQ (Skylake-SP, Zen 4 and later)
  kAvx512Vnni = 4,  // + AVX512-VNNI: int8 dot products
  kAvx512Bf16 = 5,  // + AVX512-BF16: BF16 dot products
  kAvx512Amx = 6,   // + AMX-INT8 and AVX512-VNNI (Sapphire Rapids on, tiles granted by the OS): int8 GEMMs
  kNeon = 7,        // AArch64 Advanced SIMD (every AArch64 CPU)
  kNeonDot = 8,     // + the dot-product extension (Armv8.2 dotprod): int8 dot products
};
inline constexpr int kNumSimdTargets = 9;

std::string_view SimdTargetName(SimdTarget t);
std::optional<SimdTarget> ParseSimdTarget(std::string_view name);

// Whether this CPU runs code compiled for `t` (whether this build compiled it: TargetKernels).
bool CpuSupports(SimdTarget t);
// The targets this build compiled: portable and those of the architecture that
// LATENTSERVE_SIMD_TARGETS selected (all of them by default; cmake/SimdTargets.cmake).
std::vector<SimdTarget> CompiledTargets();
// Whether `t` may be chosen under `cap`, which stands for a CPU that has `cap` and what such CPUs
// have below it: portable always; else the same architecture, at or below `cap` in the order
// above, and an extension target only on the cap's own base (cap avx512 is an AVX-512 CPU without
// either VNNI; cap avx512_vnni adds AVX512-VNNI but not AVX-VNNI, as Cascade Lake).
bool WithinCap(SimdTarget t, SimdTarget cap);
// The widest base target this CPU supports.
SimdTarget BestTarget();

}  // namespace ls::cpu
