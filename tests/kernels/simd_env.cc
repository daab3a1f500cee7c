// The kernel tests' environment: ctest runs them once per SIMD target with LS_CPU_ISA naming it
// (tests/CMakeLists.txt). Where this CPU does not run that target (or the build left it out) the
// whole run is SKIPPED with the reason; where it does, the active kernels must be capped at it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/cpu/simd/kernel_table.h"

namespace ls::cpu {
namespace {

class SimdTargetEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* env = std::getenv("LS_CPU_ISA");
    if (!env || !*env) return;
    const auto target = ParseSimdTarget(env);
    ASSERT_TRUE(target.has_value()) << "LS_CPU_ISA=" << env << " names no SIMD target";
    if (!CpuSupports(*target) || !TargetKernels(*target)) {
      // ctest's skip pattern; a build may leave out targets (LATENTSERVE_SIMD_TARGETS).
      std::fprintf(stderr, "SKIPPED: this CPU does not run the SIMD target %s%s\n", env,
                   CpuSupports(*target) ? " (not compiled in this build)" : "");
      GTEST_SKIP() << "this CPU does not run " << env;
    }
    ASSERT_EQ(SimdCap(), *target) << "LS_CPU_ISA=" << env << " did not cap the kernels";
  }
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new SimdTargetEnvironment);

}  // namespace
}  // namespace ls::cpu
