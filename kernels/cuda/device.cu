// CUDA device discovery for the backend and its tests.
#include <cuda_runtime.h>

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

}  // namespace ls::cuda
