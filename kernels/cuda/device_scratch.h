// DeviceScratch: a grow-only buffer of device memory for the intermediates of ops queued on one
// stream. Growing waits for the stream first, since queued work may still use the old buffer.
// Not thread-safe; owned by one backend (or one test).
#pragma once

#include <cstddef>

typedef struct CUstream_st* cudaStream_t;

namespace ls::cuda {

class DeviceScratch {
 public:
  DeviceScratch() = default;
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  // At least `bytes` of device memory (contents not preserved when it grows).
  void* Get(size_t bytes, cudaStream_t stream);
  template <typename T>
  T* As(size_t count, cudaStream_t stream) {
    return static_cast<T*>(Get(count * sizeof(T), stream));
  }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace ls::cuda
