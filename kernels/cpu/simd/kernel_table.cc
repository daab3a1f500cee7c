// The dispatch: every compiled target's table, merged entry by entry for this CPU and the cap.
// Compiled for the baseline instruction set; it only reads the targets' tables.
#include "kernels/cpu/simd/kernel_table.h"

#include <array>
#include <cstdlib>
#include <string_view>

namespace ls::cpu {

// Each compiled target's table (kernels/cpu/simd/table_simd.cc, compiled once per target; the
// build lists the targets it compiled in compiled_targets.inc).
#define LS_SIMD_COMPILED(id, name) \
  namespace simd_##name {          \
    const KernelTable& Table();    \
  }
#include "kernels/cpu/simd/compiled_targets.inc"
#undef LS_SIMD_COMPILED

namespace {

constexpr int kNumKernels = 0
#define LS_KERNEL(family, name, ret, params) +1
#include "kernels/cpu/simd/kernels.def"
#undef LS_KERNEL
    ;

struct Active {
  KernelTable table;
  SimdTarget cap = SimdTarget::kPortable;
  std::array<SimdTarget, kNumKernels> from{};  // the target of each entry
};

// Fills `a` with the best entries within `cap`.
void Choose(SimdTarget cap, Active* a) {
  a->cap = cap;
  a->table = KernelTable{};
  // Targets from the most preferred down; the first that has an entry gives it.
  const std::vector<SimdTarget> compiled = CompiledTargets();
  for (auto it = compiled.rbegin(); it != compiled.rend(); ++it) {
    const SimdTarget t = *it;
    if (!CpuSupports(t) || !WithinCap(t, cap)) continue;
    const KernelTable& from = *TargetKernels(t);
    int i = 0;
#define LS_KERNEL(family, name, ret, params)   \
  if (!a->table.name && from.name) {           \
    a->table.name = from.name;                 \
    a->from[i] = t;                            \
  }                                            \
  ++i;
#include "kernels/cpu/simd/kernels.def"
#undef LS_KERNEL
  }
}

SimdTarget InitialCap() {
  const char* env = std::getenv("LS_CPU_ISA");
  if (env && *env) {
    const auto t = ParseSimdTarget(env);
    if (t && CpuSupports(*t) && TargetKernels(*t)) return *t;
  }
  return BestTarget();
}

Active& State() {
  static Active* a = [] {
    auto* s = new Active;
    Choose(InitialCap(), s);
    return s;
  }();
  return *a;
}

}  // namespace

const KernelTable& ActiveKernels() { return State().table; }

const KernelTable* TargetKernels(SimdTarget t) {
  switch (t) {
#define LS_SIMD_COMPILED(id, name) \
  case SimdTarget::k##id:          \
    return &simd_##name::Table();
#include "kernels/cpu/simd/compiled_targets.inc"
#undef LS_SIMD_COMPILED
    default: return nullptr;
  }
}

bool SetSimdCap(SimdTarget cap) {
  if (!CpuSupports(cap) || !TargetKernels(cap)) return false;
  Choose(cap, &State());
  return true;
}

SimdTarget SimdCap() { return State().cap; }

SimdTarget ActiveBaseTarget() {
  // The base targets compile every kernel: the target of any BASE entry is the base in use.
  return State().from[0];
}

std::vector<SimdTarget> ActiveExtensionTargets() {
  std::vector<SimdTarget> out;
  const SimdTarget base = ActiveBaseTarget();
  for (SimdTarget t : State().from) {
    if (t == base) continue;
    bool seen = false;
    for (SimdTarget o : out) seen |= o == t;
    if (!seen) out.push_back(t);
  }
  return out;
}

std::string ActiveIsaName() {
  std::string name(SimdTargetName(ActiveBaseTarget()));
  for (SimdTarget t : ActiveExtensionTargets()) name.append("+").append(SimdTargetName(t));
  return name;
}

}  // namespace ls::cpu
