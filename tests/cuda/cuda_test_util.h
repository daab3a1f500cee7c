// Helpers for the CUDA op tests: the CUDA backend the ops run on, device arrays with checked
// copies, outputs poisoned with NaN before an op runs (so an element the op never wrote fails the
// comparison), random inputs that are never zero, and the error measures the tests state their
// tolerances in.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/grouped_gemm.h"
#include "kernels/dtype.h"

namespace ls::cuda_test {

// The CUDA backend on device 0, where cuda::DeviceCount() > 0; a failure to create it fails the
// test and returns null. Its ops run on its own stream: DeviceArray::Download waits for them.
inline std::unique_ptr<CudaBackend> Gpu() {
  std::string error;
  std::unique_ptr<CudaBackend> gpu = CreateCudaBackend(0, &error);
  EXPECT_TRUE(gpu) << error;
  return gpu;
}

// A device copy of a host vector (or n uninitialised elements); freed on destruction.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) { LS_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T))); }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { Upload(host); }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return p_; }
  size_t size() const { return n_; }
  // Complete when it returns, so that work on any stream sees the data.
  void Upload(const std::vector<T>& host) {
    LS_CUDA_CHECK(cudaMemcpy(p_, host.data(), std::min(n_, host.size()) * sizeof(T), cudaMemcpyHostToDevice));
    LS_CUDA_CHECK(cudaDeviceSynchronize());
  }
  // Waits for the device, then copies back.
  std::vector<T> Download() const {
    LS_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> host(n_);
    LS_CUDA_CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // All bytes 0xFF: NaN as float32, an out-of-range value as an integer.
  void Poison() {
    LS_CUDA_CHECK(cudaMemset(p_, 0xFF, n_ * sizeof(T)));
    LS_CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// Normal values times `scale`, never exactly zero.
inline std::vector<float> RandomFloats(size_t n, std::mt19937& rng, float scale = 1.f) {
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (auto& x : v) {
    do {
      x = nd(rng) * scale;
    } while (x == 0.f);
  }
  return v;
}

inline std::vector<uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = F32ToBf16(v[i]);
  return out;
}

// Random BF16 values (normal times `scale`, never zero).
inline std::vector<uint16_t> RandomBf16(size_t n, std::mt19937& rng, float scale = 1.f) {
  std::vector<uint16_t> v = ToBf16(RandomFloats(n, rng, scale));
  for (auto& x : v)
    if ((x & 0x7fffu) == 0) x = F32ToBf16(scale);
  return v;
}

// ‖got − ref‖ / ‖ref‖ in double; NaN if got holds a NaN.
inline double RelNormError(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

// Every |got[i] − ref[i]| ≤ atol + rtol · |ref[i]| (a NaN fails); names the first few misses.
inline ::testing::AssertionResult AllClose(const std::vector<float>& got, const std::vector<float>& ref, double atol,
                                           double rtol) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "sizes differ";
  size_t bad = 0;
  ::testing::AssertionResult result = ::testing::AssertionFailure();
  for (size_t i = 0; i < ref.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(got[i]) - ref[i]);
    if (diff <= atol + rtol * std::fabs(ref[i])) continue;  // false for NaN
    if (bad++ < 5) result << "[" << i << "] got " << got[i] << " want " << ref[i] << "; ";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return result << bad << " of " << ref.size() << " elements off";
}

// The grouping of permuted rows by expert for the grouped GEMMs, on the device: experts with these
// row counts, in order (offsets and row tiles prefix-summed here).
class DeviceExpertRows {
 public:
  explicit DeviceExpertRows(const std::vector<int32_t>& counts)
      : counts_(counts), offsets_(Prefix(counts, 1)), tiles_(Prefix(counts, cuda::kGroupedGemmTileRows)) {
    rows_.counts = counts_.get();
    rows_.offsets = offsets_.get();
    rows_.tile_offsets = tiles_.get();
    rows_.num_experts = static_cast<int32_t>(counts.size());
    for (int32_t c : counts) rows_.num_rows += c;
  }
  const cuda::ExpertRows& rows() const { return rows_; }

 private:
  // [N + 1] exclusive prefix sums of ceil(count / per).
  static std::vector<int32_t> Prefix(const std::vector<int32_t>& counts, int32_t per) {
    std::vector<int32_t> out(counts.size() + 1, 0);
    for (size_t e = 0; e < counts.size(); ++e) out[e + 1] = out[e] + (counts[e] + per - 1) / per;
    return out;
  }
  DeviceArray<int32_t> counts_, offsets_, tiles_;
  cuda::ExpertRows rows_;
};

}  // namespace ls::cuda_test
