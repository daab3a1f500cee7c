// The CUDA backend's GLU activation equals the CPU backend's for SiTU and SiLU over gates reaching
// saturation (tolerance 1e-5 relative, 1e-6 absolute). Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

using cuda_test::AllClose;
using cuda_test::DeviceArray;

TEST(CudaGluActivation, MatchesCpuForSiTUAndSiLU) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 33, width = 1001;
  std::mt19937 rng(6);
  CpuBackend cpu(1);
  auto gpu = cuda_test::Gpu();
  ASSERT_TRUE(gpu);
  for (Activation act : {Activation::kSiTU, Activation::kSiLU}) {
    const std::vector<float> gate = cuda_test::RandomFloats(rows * width, rng, 4.f);
    const std::vector<float> up = cuda_test::RandomFloats(rows * width, rng);
    std::vector<float> ref(rows * width);
    cpu.GluActivation(gate.data(), up.data(), rows, width, act, ref.data());
    DeviceArray<float> dgate(gate), dup(up), dout(ref.size());
    dout.Poison();
    gpu->GluActivation(dgate.get(), dup.get(), rows, width, act, dout.get());
    EXPECT_TRUE(AllClose(dout.Download(), ref, 1e-6, 1e-5)) << (act == Activation::kSiTU ? "SiTU" : "SiLU");
  }
}

}  // namespace
}  // namespace ls
