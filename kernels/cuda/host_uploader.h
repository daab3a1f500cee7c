// HostUploader: copies the small host arrays an op needs (token ids, positions, block tables) to
// device memory for the work queued next on one stream. It stages through a ring of pinned
// buffers, each with its own device buffer and an event marking when its last copy finished,
// so that the host waits only for a copy made kSlots uploads ago, never for work it just queued.
// Not thread-safe; owned by one backend.
#pragma once

#include <array>
#include <cstddef>

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;

namespace ls::cuda {

class HostUploader {
 public:
  // About six uploads per layer: the host can queue ten layers ahead of the device.
  static constexpr int kSlots = 64;

  explicit HostUploader(cudaStream_t stream);
  ~HostUploader();
  HostUploader(const HostUploader&) = delete;
  HostUploader& operator=(const HostUploader&) = delete;

  // Queues a copy of `bytes` from host `src` (which may be reused at once) and returns the device
  // copy. It stays valid for work queued on the stream before the next kSlots uploads.
  const void* Upload(const void* src, size_t bytes);
  template <typename T>
  const T* Upload(const T* src, size_t count) {
    return static_cast<const T*>(Upload(static_cast<const void*>(src), count * sizeof(T)));
  }

 private:
  struct Slot {
    void* host = nullptr;  // pinned
    void* device = nullptr;
    size_t capacity = 0;
    cudaEvent_t copied = nullptr;  // recorded after the slot's last copy
  };
  cudaStream_t stream_;
  std::array<Slot, kSlots> slots_;
  int next_ = 0;
};

}  // namespace ls::cuda
