// The CPU kernel targets this build compiled (LATENTSERVE_SIMD_TARGETS, cmake/SimdTargets.cmake):
// the dispatch sees exactly the configured ones, the default compiles every target of the
// architecture, and the native rule, applied at configure time to this machine's /proc/cpuinfo,
// names the targets the runtime probe finds on this CPU. Run on the machine that configured the
// build (not under emulation, where the CPU is another: tools/x86_emulated_test.sh leaves it out).
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/simd/kernel_table.h"

namespace ls::cpu {
namespace {

// The build's lists, comma-separated (tests/kernels/CMakeLists.txt).
std::vector<std::string> Split(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const size_t comma = s.find(',');
    out.emplace_back(s.substr(0, comma));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}
std::vector<std::string> Names(const std::vector<SimdTarget>& targets) {
  std::vector<std::string> out;
  for (SimdTarget t : targets) out.emplace_back(SimdTargetName(t));
  return out;
}
bool Contains(const std::vector<std::string>& names, std::string_view name) {
  for (const auto& n : names)
    if (n == name) return true;
  return false;
}

TEST(SimdBuild, TheDispatchSeesTheConfiguredTargets) {
  std::vector<std::string> want{"portable"};
  for (auto& t : Split(LS_TEST_SIMD_COMPILED)) want.push_back(t);
  const std::vector<std::string> got = Names(CompiledTargets());
  EXPECT_EQ(got, want) << "LATENTSERVE_SIMD_TARGETS=" << LS_TEST_SIMD_REQUEST;
  // A target's table is there exactly when it was compiled; a cap on one that was not is refused.
  for (int i = 0; i < kNumSimdTargets; ++i) {
    const auto t = static_cast<SimdTarget>(i);
    const bool compiled = Contains(got, SimdTargetName(t));
    EXPECT_EQ(TargetKernels(t) != nullptr, compiled) << SimdTargetName(t);
    if (!compiled) {
      EXPECT_FALSE(SetSimdCap(t)) << SimdTargetName(t);
    }
  }
}

TEST(SimdBuild, TheDefaultCompilesEveryTargetOfTheArchitecture) {
  if (std::string_view(LS_TEST_SIMD_REQUEST) != "all")
    GTEST_SKIP() << "this build compiles LATENTSERVE_SIMD_TARGETS=" << LS_TEST_SIMD_REQUEST;
  // The build's reading of targets.def (cmake/SimdTargets.cmake) agrees with the C++ rows'.
  EXPECT_EQ(Names(CompiledTargets()), Names(ArchitectureTargets()));
#if defined(__x86_64__) || defined(__aarch64__)
  EXPECT_GT(CompiledTargets().size(), 2u);
#endif
}

TEST(SimdBuild, NativeNamesWhatThisCpuRuns) {
  if (!LS_TEST_SIMD_NATIVE_KNOWN) GTEST_SKIP() << "the configure step could not read this machine's CPU features";
  const std::vector<std::string> native = Split(LS_TEST_SIMD_NATIVE);
  for (int i = 1; i < kNumSimdTargets; ++i) {
    const auto t = static_cast<SimdTarget>(i);
    // AMX also needs the OS to grant the tile state, which cpuinfo does not show (kernels before
    // 5.16 list the features and grant nothing): native may compile it where the probe refuses it.
    if (t == SimdTarget::kAvx512Amx && !CpuSupports(t)) continue;
    EXPECT_EQ(Contains(native, SimdTargetName(t)), CpuSupports(t))
        << SimdTargetName(t) << ": /proc/cpuinfo at configure time and the runtime probe disagree";
  }
}

}  // namespace
}  // namespace ls::cpu
