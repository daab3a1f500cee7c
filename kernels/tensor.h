// Tensor: a non-owning view of at most two dimensions over backend memory.
// Weights are [out, in] as in PyTorch nn.Linear; activations are [rows, width].
// A weight prepared for a backend's GEMM may be stored in that backend's packed layout.
#pragma once

#include <cassert>
#include <cstdint>

#include "kernels/dtype.h"

namespace ls {

enum class Layout : uint8_t {
  kRowMajor,  // [rows, cols]
  // The CPU GEMM's packed weights (kernels/cpu/packed_gemm.h): rows in panels of kPanelRows,
  // each panel [cols][kPanelRows] so that one k step of a panel is one contiguous run; the last
  // panel is padded with zero rows.
  kPanels,
};
inline constexpr int64_t kPanelRows = 32;

struct Tensor {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;  // 1 for a vector
  int64_t cols = 0;
  Layout layout = Layout::kRowMajor;

  int64_t numel() const { return rows * cols; }
  // Rows as stored (padded to whole panels when packed).
  int64_t stored_rows() const {
    return layout == Layout::kPanels ? (rows + kPanelRows - 1) / kPanelRows * kPanelRows : rows;
  }
  size_t bytes() const { return static_cast<size_t>(stored_rows() * cols) * DTypeSize(dtype); }
  bool empty() const { return data == nullptr; }
  // Row r as a view of shape [1, cols] (row-major only).
  Tensor Row(int64_t r) const {
    assert(layout == Layout::kRowMajor);
    return Tensor{static_cast<const unsigned char*>(data) + r * cols * DTypeSize(dtype), dtype, 1, cols};
  }
  // Rows [r0, r0 + n) as a view (packed: r0 at a panel boundary).
  Tensor RowSlice(int64_t r0, int64_t n) const {
    assert(layout == Layout::kRowMajor || r0 % kPanelRows == 0);
    return Tensor{static_cast<const unsigned char*>(data) + r0 * cols * DTypeSize(dtype), dtype, n, cols, layout};
  }
};

}  // namespace ls
