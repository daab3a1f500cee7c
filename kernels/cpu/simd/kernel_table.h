// KernelTable: one pointer per kernel of kernels.def. Each SIMD target has its own table (entries
// of the families it does not compile are null); the active table takes each entry from the
// best target this CPU runs within the cap (isa.h). The CPU ops call kernels through
// ActiveKernels(), so the dispatch decision is made once, not per call site.
// The cap starts as the environment's LS_CPU_ISA (a target name) or else the best target; the
// server's --cpu_isa and tests change it with SetSimdCap, between ops (not while kernels run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/attention_core.h"
#include "kernels/cpu/bf16_dot_gemm.h"
#include "kernels/cpu/int8_dot_gemm.h"
#include "kernels/cpu/latent_attention_core.h"
#include "kernels/cpu/simd/isa.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace ls::cpu {

struct KernelTable {
#define LS_KERNEL(family, name, ret, params) ret(*name) params = nullptr;
#include "kernels/cpu/simd/kernels.def"
#undef LS_KERNEL
};

// The kernels in use.
const KernelTable& ActiveKernels();
// One target's own table, or null when this build did not compile the target.
const KernelTable* TargetKernels(SimdTarget t);
// Makes the active table the best this CPU runs within `cap`; false (nothing changed) when the
// CPU cannot run `cap` itself.
bool SetSimdCap(SimdTarget cap);
SimdTarget SimdCap();
// The target each active kernel comes from: the base target in use (portable, avx2, avx512 or
// neon) and the extension targets some kernels use (avx512_vnni, ...), for the ready line.
SimdTarget ActiveBaseTarget();
std::vector<SimdTarget> ActiveExtensionTargets();
// "avx512" or "avx512+avx512_vnni+avx512_bf16": the base target and the extensions in use.
std::string ActiveIsaName();

}  // namespace ls::cpu
