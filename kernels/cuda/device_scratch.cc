// DeviceScratch: grow-only device memory (see device_scratch.h).
#include "kernels/cuda/device_scratch.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"

namespace ls::cuda {

DeviceScratch::~DeviceScratch() {
  if (data_) cudaFree(data_);  // no check: a destructor may run after a device fault
}

void* DeviceScratch::Get(size_t bytes, cudaStream_t stream) {
  if (bytes <= capacity_ && data_) return data_;
  if (data_) {
    LS_CUDA_CHECK(cudaStreamSynchronize(stream));
    LS_CUDA_CHECK(cudaFree(data_));
    data_ = nullptr;
    capacity_ = 0;
  }
  // Grow by at least half again, so a slowly growing batch does not reallocate every step.
  const size_t want = std::max<size_t>(bytes + bytes / 2, 256);
  LS_CUDA_CHECK(cudaMalloc(&data_, want));
  capacity_ = want;
  return data_;
}

}  // namespace ls::cuda
