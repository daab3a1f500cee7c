// CUDA device discovery for the backend and its tests, and the failure report of cuda_check.h.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace ls::cuda {

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver / no device" error
    return 0;
  }
  return n;
}

void Fail(const char* what, const char* error, const char* file, int line) {
  std::fprintf(stderr, "CUDA backend failure at %s:%d: %s: %s\n", file, line, what, error);
  std::fflush(stderr);
  std::abort();
}

}  // namespace ls::cuda
