// Every op of kernels/ops.def through the Backend interface on the CPU backend, under every SIMD
// target this CPU runs and two thread splits, against the same op capped at the portable target on
// one thread (the cases: backend_op_cases.h). A target or a thread split that changes an op's
// results beyond 1e-4 (relative to 1 + |value|) fails here, whatever kernel it went through.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/simd/kernel_table.h"
#include "tests/kernels/backend_op_cases.h"

namespace ls::testing {
namespace {

// The outputs of one case on a CPU backend of `threads` threads with the kernels capped at `cap`.
std::vector<float> RunOnCpu(const OpCase& c, cpu::SimdTarget cap, int threads) {
  EXPECT_TRUE(cpu::SetSimdCap(cap));
  CpuBackend be(threads);
  Rig rig(be, 1234);
  c.run(rig);
  return rig.out;
}

class BackendOpsTest : public ::testing::TestWithParam<OpCase> {
 protected:
  void TearDown() override { cpu::SetSimdCap(cpu::BestTarget()); }
};

TEST_P(BackendOpsTest, EveryTargetAndThreadSplitMatchesPortable) {
  const OpCase& c = GetParam();
  const std::vector<float> ref = RunOnCpu(c, cpu::SimdTarget::kPortable, 1);
  ASSERT_FALSE(ref.empty()) << c.name << " reads nothing back";
  ASSERT_TRUE(std::any_of(ref.begin(), ref.end(), [](float v) { return v != 0.f; })) << c.name << " gives only zeros";
  ASSERT_TRUE(std::all_of(ref.begin(), ref.end(), [](float v) { return std::isfinite(v); }))
      << c.name << " gives a value that is not finite";
  int ran = 0;
  for (cpu::SimdTarget t : cpu::CompiledTargets()) {
    if (!cpu::CpuSupports(t)) continue;
    for (int threads : {2, 3}) {
      const std::vector<float> got = RunOnCpu(c, t, threads);
      ASSERT_EQ(got.size(), ref.size()) << c.name << " on " << cpu::SimdTargetName(t);
      const Mismatch m = Compare(got, ref, 1e-4);
      EXPECT_LE(m.worst, 1.0) << c.name << " on " << cpu::SimdTargetName(t) << " with " << threads
                              << " threads: value " << m.at << " is " << got[m.at] << ", portable " << ref[m.at];
      ++ran;
    }
  }
  EXPECT_GT(ran, 0);
}

INSTANTIATE_TEST_SUITE_P(Ops, BackendOpsTest, ::testing::ValuesIn(BackendOpCases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ls::testing
