// DeviceBuffer: an owning, growable buffer of backend memory (RAII over Backend::Allocate/Free).
#pragma once

#include <cstddef>
#include <utility>

#include "kernels/backend.h"

namespace ls {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(Backend* backend) : backend_(backend) {}
  DeviceBuffer(Backend* backend, size_t bytes) : backend_(backend) { Reserve(bytes); }
  ~DeviceBuffer() { Release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Release();
      backend_ = std::exchange(o.backend_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Ensures room for `bytes`; contents are not preserved when it grows.
  void Reserve(size_t bytes) {
    if (bytes <= capacity_) return;
    Release();
    data_ = backend_->Allocate(bytes);
    capacity_ = bytes;
  }
  template <typename T>
  T* as(size_t count) {
    Reserve(count * sizeof(T));
    return static_cast<T*>(data_);
  }
  void* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  void Release() {
    if (data_) backend_->Free(data_);
    data_ = nullptr;
    capacity_ = 0;
  }
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace ls
