// Tensor: a non-owning view of at most two dimensions over backend memory.
// Weights are [out, in] as in PyTorch nn.Linear; activations are [rows, width].
// A weight prepared for a backend's GEMM may be stored in that backend's packed layout. A quantized
// weight carries its format with it: codes of an integer or small-float type plus the scales (and
// zero points) that turn them into values, so the ops, not the layers, decide how to read it.
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
  // The int8-activation GEMM's packed weights (kernels/cpu/int8_dot_gemm.h): panels of kPanelRows
  // rows, k in quads (padded to a multiple of four), each row's four codes of a quad together.
  kPanelsInt8Dot,
  // The BF16-activation GEMM's packed weights (kernels/cpu/bf16_dot_gemm.h): panels of kPanelRows
  // rows, k in pairs (padded to an even count), each row's two values of a pair together.
  kPanelsBf16Dot,
};
inline constexpr int64_t kPanelRows = 32;

// n rounded up to a multiple of 64 bytes: where the parts of a packed or placed weight start.
inline constexpr size_t Align64(size_t n) { return (n + 63) / 64 * 64; }

// How a quantized weight's codes become values: w[n, k] = (code[n, k] − zero) · scale, one scale
// (and zero point) per block of block_rows × block_cols elements. Row-major: the scales form the
// grid [ceil(rows / block_rows), ceil(cols / block_cols)] (edge blocks may be partial). Packed
// (Layout::kPanels, block_rows 1): per panel and k group, the kPanelRows scales of its rows in row
// order, [panels, ceil(cols / block_cols), kPanelRows], zero points likewise.
struct QuantScales {
  const void* scale = nullptr;      // null: not quantized
  const void* zero = nullptr;       // U8 zero points on the scale grid (U4 codes only); null: 8 for U4, 0 otherwise
  DType scale_dtype = DType::kF32;  // F32, BF16, F16 or E8M0
  int32_t block_rows = 0;
  int32_t block_cols = 0;
  // The weight's GEMMs round each activation row to int8 (one scale per row) and multiply in
  // integers (the online w8a8 and w4a8 schemes); otherwise activations stay float32.
  bool int8_activations = false;
};

struct Tensor {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;  // 1 for a vector
  int64_t cols = 0;
  Layout layout = Layout::kRowMajor;
  QuantScales quant = {};

  int64_t numel() const { return rows * cols; }
  bool quantized() const { return quant.scale != nullptr; }
  // Rows as stored (padded to whole panels when packed).
  int64_t stored_rows() const {
    return layout == Layout::kRowMajor ? rows : (rows + kPanelRows - 1) / kPanelRows * kPanelRows;
  }
  // Columns as stored (padded to whole k quads in Layout::kPanelsInt8Dot, k pairs in kPanelsBf16Dot).
  int64_t stored_cols() const {
    return layout == Layout::kPanelsInt8Dot ? (cols + 3) / 4 * 4 : layout == Layout::kPanelsBf16Dot ? (cols + 1) / 2 * 2 : cols;
  }
  // Bytes of one stored row (4-bit codes: cols is even).
  size_t row_bytes() const { return DTypeBytes(dtype, stored_cols()); }
  // Bytes of the values or codes (not the scales).
  size_t bytes() const { return static_cast<size_t>(stored_rows()) * row_bytes(); }
  // The scale grid (quantized only), as stored.
  int64_t scale_rows() const {
    if (!quantized()) return 0;
    return layout == Layout::kRowMajor ? (rows + quant.block_rows - 1) / quant.block_rows : stored_rows();
  }
  int64_t scale_cols() const { return quantized() ? (cols + quant.block_cols - 1) / quant.block_cols : 0; }
  // The scales' bytes (kPanelsInt8Dot I8: followed by each stored row's int32 code sum).
  size_t scale_bytes() const {
    const size_t sums = layout == Layout::kPanelsInt8Dot && dtype == DType::kI8 ? stored_rows() * 4 : 0;
    return DTypeBytes(quant.scale_dtype, scale_rows() * scale_cols()) + sums;
  }
  size_t zero_bytes() const { return quant.zero ? static_cast<size_t>(scale_rows() * scale_cols()) : 0; }
  bool empty() const { return data == nullptr; }
  // Row r as a view of shape [1, cols] (row-major, not quantized).
  Tensor Row(int64_t r) const {
    assert(layout == Layout::kRowMajor && !quantized());
    return Tensor{static_cast<const unsigned char*>(data) + r * row_bytes(), dtype, 1, cols};
  }
  // Rows [r0, r0 + n) as a view (packed: r0 at a panel boundary; quantized: Layout::kPanels only).
  // Row-major quantized: r0 on a block boundary; packed: r0 on a panel boundary.
  Tensor RowSlice(int64_t r0, int64_t n) const {
    assert(layout == Layout::kRowMajor ? !quantized() || r0 % quant.block_rows == 0 : r0 % kPanelRows == 0);
    assert(layout != Layout::kPanelsInt8Dot);
    Tensor t{static_cast<const unsigned char*>(data) + r0 * row_bytes(), dtype, n, cols, layout, quant};
    if (quantized()) {
      // Row-major: the block rows above r0; packed: kPanelRows scales per panel and group.
      const int64_t skip = layout == Layout::kRowMajor ? r0 / quant.block_rows * scale_cols() : r0 * scale_cols();
      t.quant.scale = static_cast<const unsigned char*>(quant.scale) + DTypeBytes(quant.scale_dtype, skip);
      if (quant.zero) t.quant.zero = static_cast<const unsigned char*>(quant.zero) + skip;
    }
    return t;
  }
};

}  // namespace ls
