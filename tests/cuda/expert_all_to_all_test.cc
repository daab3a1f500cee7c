// NCCL all-to-all of row blocks on one GPU (D = 1: the exchange is a copy through NCCL). Reports
// SKIPPED without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/expert_all_to_all.h"

namespace ls {
namespace {

TEST(CudaAllToAll, SingleRankExchangeCopiesRows) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  ncclComm_t comm;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess);
  const int64_t rows = 37, width = 64;
  std::vector<float> host(rows * width);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f;
  float *send, *recv;
  ASSERT_EQ(cudaMalloc(&send, host.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&recv, host.size() * 4), cudaSuccess);
  cudaMemcpy(send, host.data(), host.size() * 4, cudaMemcpyHostToDevice);
  EXPECT_EQ(cuda::AllToAllRows(send, {rows}, recv, {rows}, width, comm, nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> got(host.size());
  cudaMemcpy(got.data(), recv, got.size() * 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(got, host);
  cudaFree(send);
  cudaFree(recv);
  ncclCommDestroy(comm);
}

}  // namespace
}  // namespace ls
