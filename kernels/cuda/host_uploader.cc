// HostUploader: pinned staging ring for host-to-device uploads (see host_uploader.h).
#include "kernels/cuda/host_uploader.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_check.h"

namespace ls::cuda {

HostUploader::HostUploader(cudaStream_t stream) : stream_(stream) {
  for (Slot& s : slots_) LS_CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
}

HostUploader::~HostUploader() {
  cudaStreamSynchronize(stream_);  // no checks: a destructor may run after a device fault
  for (Slot& s : slots_) {
    if (s.host) cudaFreeHost(s.host);
    if (s.device) cudaFree(s.device);
    if (s.copied) cudaEventDestroy(s.copied);
  }
}

const void* HostUploader::Upload(const void* src, size_t bytes) {
  Slot& s = slots_[next_];
  next_ = (next_ + 1) % kSlots;
  // The pinned buffer is free once its last copy has finished.
  LS_CUDA_CHECK(cudaEventSynchronize(s.copied));
  if (bytes > s.capacity || !s.device) {
    // Work queued earlier may still read the old device buffer.
    LS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (s.host) LS_CUDA_CHECK(cudaFreeHost(s.host));
    if (s.device) LS_CUDA_CHECK(cudaFree(s.device));
    s.host = s.device = nullptr;
    s.capacity = std::max<size_t>(bytes + bytes / 2, 4096);
    LS_CUDA_CHECK(cudaHostAlloc(&s.host, s.capacity, cudaHostAllocDefault));
    LS_CUDA_CHECK(cudaMalloc(&s.device, s.capacity));
  }
  if (bytes > 0) {
    std::memcpy(s.host, src, bytes);
    // Queued after every earlier use of s.device on this stream, so it cannot overwrite data
    // that queued work still reads.
    LS_CUDA_CHECK(cudaMemcpyAsync(s.device, s.host, bytes, cudaMemcpyHostToDevice, stream_));
  }
  LS_CUDA_CHECK(cudaEventRecord(s.copied, stream_));
  return s.device;
}

}  // namespace ls::cuda
