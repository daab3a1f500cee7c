// One SIMD target's KernelTable (compiled once per target, kernels/CMakeLists.txt): the kernels of
// the families this target compiles (LS_SIMD_FAMILY_BASE/INT8/BF16), null for the others.
#include "kernels/cpu/simd/vec.h"

#if LS_SIMD_FAMILY_BASE
#define LS_FILL_BASE(name) t.name = &name;
#else
#define LS_FILL_BASE(name)
#endif
#if LS_SIMD_FAMILY_INT8
#define LS_FILL_INT8(name) t.name = &name;
#else
#define LS_FILL_INT8(name)
#endif
#if LS_SIMD_FAMILY_BF16
#define LS_FILL_BF16(name) t.name = &name;
#else
#define LS_FILL_BF16(name)
#endif

// Baseline code (no target instructions): the dispatch calls it for the targets it considers.
LS_SIMD_NS_BEGIN

const KernelTable& Table() {
  static const KernelTable table = [] {
    KernelTable t;
#define LS_KERNEL(family, name, ret, params) LS_FILL_##family(name)
#include "kernels/cpu/simd/kernels.def"
#undef LS_KERNEL
    return t;
  }();
  return table;
}

LS_SIMD_NS_END
