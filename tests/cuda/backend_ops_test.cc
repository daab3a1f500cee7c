// Every op of kernels/ops.def through the Backend interface on the CUDA backend, against the CPU
// backend with the GPU's rounding (BF16 GEMM weights and inputs, tests/bf16_activations_backend.h),
// from the same cases as the CPU's SIMD targets (tests/kernels/backend_op_cases.h); tolerance 2e-3
// relative to 1 + |value| (accumulation order and the GPU's exponentials). Reports SKIPPED
// without a device.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "tests/bf16_activations_backend.h"
#include "tests/kernels/backend_op_cases.h"

namespace ls::testing {
namespace {

class CudaBackendOpsTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaBackendOpsTest, MatchesCpuWithGpuRounding) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const OpCase& c = GetParam();
  Bf16ActivationsBackend cpu(2);
  Rig want(cpu, 1234);
  c.run(want);
  std::string error;
  std::unique_ptr<CudaBackend> gpu = CreateCudaBackend(0, &error);
  ASSERT_TRUE(gpu) << error;
  std::vector<float> got;
  {
    Rig rig(*gpu, 1234);
    c.run(rig);
    got = rig.out;
  }
  ASSERT_EQ(got.size(), want.out.size()) << c.name;
  const Mismatch m = Compare(got, want.out, 2e-3);
  EXPECT_LE(m.worst, 1.0) << c.name << ": value " << m.at << " is " << got[m.at] << ", CPU " << want.out[m.at];
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaBackendOpsTest, ::testing::ValuesIn(BackendOpCases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ls::testing
