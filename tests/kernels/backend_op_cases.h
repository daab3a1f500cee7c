// The cases of the table-driven backend test: one per op of kernels/ops.def, each drawing its
// inputs from a seed into a backend's memory, running the op and reading back everything it
// writes, through the Backend interface only, so that one case serves every backend
// (tests/kernels/backend_ops_test.cc: the CPU's SIMD targets; tests/cuda/backend_ops_test.cc: the
// CUDA backend). The list is built from ops.def: an op without a case does not build.
#pragma once

#include <algorithm>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/dtype.h"

namespace ls::testing {

// Inputs drawn from a seed in a backend's memory, and the outputs read back.
class Rig {
 public:
  Rig(Backend& be, uint32_t seed) : be_(be), rng_(seed) {}
  ~Rig() {
    for (void* p : owned_) be_.Free(p);
  }
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  Backend& be() { return be_; }
  std::mt19937& rng() { return rng_; }

  std::vector<float> Values(int64_t n, float scale = 1.f) {
    std::normal_distribution<float> nd(0.f, scale);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = nd(rng_);
    return v;
  }
  // Backend memory holding `host`.
  template <typename T>
  T* Put(const std::vector<T>& host) {
    const size_t bytes = std::max<size_t>(host.size() * sizeof(T), 1);
    void* p = be_.Allocate(bytes);
    owned_.push_back(p);
    if (!host.empty()) be_.CopyToDevice(p, host.data(), host.size() * sizeof(T));
    return static_cast<T*>(p);
  }
  float* Random(int64_t n, float scale = 1.f) { return Put(Values(n, scale)); }
  float* Filled(int64_t n, float value) { return Put(std::vector<float>(static_cast<size_t>(n), value)); }
  // Host memory kept until the rig goes (the step metadata the backend reads from the host).
  template <typename T>
  const T* Host(std::vector<T> v) {
    host_.emplace_back(v.size() * sizeof(T));
    std::memcpy(host_.back().data(), v.data(), v.size() * sizeof(T));
    return reinterpret_cast<const T*>(host_.back().data());
  }
  // A weight of `dt` with normal values, prepared by the backend for `use`.
  Tensor Weight(int64_t rows, int64_t cols, DType dt, WeightUse use, float scale = 0.1f) {
    const std::vector<float> v = Values(rows * cols, scale);
    host_.emplace_back(DTypeBytes(dt, rows * cols));
    unsigned char* src = host_.back().data();
    for (int64_t i = 0; i < rows * cols; ++i) {
      if (dt == DType::kF32) {
        std::memcpy(src + 4 * i, &v[i], 4);
      } else {
        const uint16_t h = dt == DType::kBF16 ? F32ToBf16(v[i]) : F32ToF16(v[i]);
        std::memcpy(src + 2 * i, &h, 2);
      }
    }
    const Tensor w{src, dt, rows, cols};
    const size_t bytes = be_.PreparedWeightBytes(w, use);
    if (bytes == 0) return be_.PrepareWeight(w, use, nullptr);
    void* dst = be_.Allocate(bytes);
    owned_.push_back(dst);
    return be_.PrepareWeight(w, use, dst);
  }
  // Appends n values of backend memory at p to the outputs.
  void Read(const float* p, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    if (n > 0) be_.CopyToHost(v.data(), p, v.size() * sizeof(float));
    out.insert(out.end(), v.begin(), v.end());
  }
  void Read(const int32_t* p, int64_t n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    if (n > 0) be_.CopyToHost(v.data(), p, v.size() * sizeof(int32_t));
    out.insert(out.end(), v.begin(), v.end());
  }

  std::vector<float> out;

 private:
  Backend& be_;
  std::mt19937 rng_;
  std::deque<std::vector<unsigned char>> host_;
  std::vector<void*> owned_;
};

struct OpCase {
  const char* name;
  void (*run)(Rig&);
};
// Every op of kernels/ops.def, in its order.
const std::vector<OpCase>& BackendOpCases();

// The largest of |got − want| / (tolerance · (1 + |want|)) over the values (NaN: infinite), and
// its index; at most 1 means within tolerance.
struct Mismatch {
  double worst = 0;
  size_t at = 0;
};
Mismatch Compare(const std::vector<float>& got, const std::vector<float>& want, double tolerance);

}  // namespace ls::testing
