// Tensor: a non-owning, row-major view of at most two dimensions over backend memory.
// Weights are [out, in] as in PyTorch nn.Linear; activations are [rows, width].
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace ls {

struct Tensor {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;  // 1 for a vector
  int64_t cols = 0;

  int64_t numel() const { return rows * cols; }
  size_t bytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
  bool empty() const { return data == nullptr; }
  // Row r as a view of shape [1, cols].
  Tensor Row(int64_t r) const {
    return Tensor{static_cast<const unsigned char*>(data) + r * cols * DTypeSize(dtype), dtype, 1, cols};
  }
  // Rows [r0, r0 + n) as a view.
  Tensor RowSlice(int64_t r0, int64_t n) const {
    return Tensor{static_cast<const unsigned char*>(data) + r0 * cols * DTypeSize(dtype), dtype, n, cols};
  }
};

}  // namespace ls
