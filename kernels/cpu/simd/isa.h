// The CPU's instruction sets and the SIMD targets the CPU kernels are compiled for (one row each
// in kernels/cpu/simd/targets.def). Every kernel of kernels/cpu/simd/kernels.def is compiled once
// per target (each in its own namespace, so no code built for a wider instruction set is
// reachable except through the dispatch); at start-up the dispatch takes, kernel by kernel, the
// best target this CPU runs (kernel_table.h). A cap (the server's --cpu_isa, tests' forced
// targets) limits the choice to a target and those below it, so that narrower paths run and are
// checked on a wider CPU too. Also the L2 size the kernels block for.
// Owns nothing; the feature probe and the L2 query run once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ls::cpu {

// The targets of targets.def, in its order (of preference within an architecture: a later one is
// chosen over an earlier one when the CPU has it and the cap allows it).
enum class SimdTarget : int {
#define LS_SIMD_TARGET_ROW(id, name, base, arch, families, compile, needs) k##id,
#include "kernels/cpu/simd/targets.def"
#undef LS_SIMD_TARGET_ROW
};
inline constexpr int kNumSimdTargets = 0
#define LS_SIMD_TARGET_ROW(id, name, base, arch, families, compile, needs) +1
#include "kernels/cpu/simd/targets.def"
#undef LS_SIMD_TARGET_ROW
    ;

std::string_view SimdTargetName(SimdTarget t);
std::optional<SimdTarget> ParseSimdTarget(std::string_view name);

// Whether this CPU runs code compiled for `t` (whether this build compiled it: TargetKernels).
bool CpuSupports(SimdTarget t);
// The targets this build compiled: portable and those of the architecture that
// LATENTSERVE_SIMD_TARGETS selected (all of them by default; cmake/SimdTargets.cmake).
std::vector<SimdTarget> CompiledTargets();
// Every target of this binary's architecture in targets.def, portable first (what the default
// build compiles).
std::vector<SimdTarget> ArchitectureTargets();
// Whether `t` may be chosen under `cap`, which stands for a CPU that has `cap` and what such CPUs
// have below it: portable always; else the same architecture, at or below `cap` in the order
// above, and an extension target only on the cap's own base (cap avx512 is an AVX-512 CPU without
// either VNNI; cap avx512_vnni adds AVX512-VNNI but not AVX-VNNI, as Cascade Lake).
bool WithinCap(SimdTarget t, SimdTarget cap);
// The widest base target this CPU supports.
SimdTarget BestTarget();

// The bytes of one core's L2 cache (what the C library reports; 1 MiB where it reports nothing),
// which sizes the CPU kernels' blocking.
int64_t CpuL2Bytes();

}  // namespace ls::cpu
