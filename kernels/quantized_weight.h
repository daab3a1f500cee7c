// Quantized weight formats on the host: the value of an element of a row-major quantized Tensor
// (the definition every kernel follows), whole rows dequantized, and online quantization of float
// weights into the formats the kernels read (int8 per row, FP8 e4m3 in 128 × 128 blocks, int4 in
// groups of 32 along k). Pure functions; the caller owns every buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/tensor.h"

namespace ls {

class ThreadPool;

// The integer or small-float value of a code (the zero point not yet subtracted).
float CodeValue(DType codes, const void* data, int64_t i);
// The zero point of block (br, bc) of a row-major quantized weight (8 for U4 without zero points,
// else 0).
int32_t ZeroPoint(const Tensor& w, int64_t br, int64_t bc);
// Scale of block (br, bc) of a row-major quantized weight as float32.
float BlockScale(const Tensor& w, int64_t br, int64_t bc);
// w[n, k] of a row-major weight: (code − zero) · scale in float32 (one rounding: the product), or
// the stored value when not quantized.
float WeightValue(const Tensor& w, int64_t n, int64_t k);
// Row n of a row-major weight as float32 values.                                   out: [cols]
void DequantizeRow(const Tensor& w, int64_t n, float* out);

// Online quantization schemes of float weights (`--quantization`).
enum class QuantScheme : uint8_t {
  kNone,
  kInt8,  // I8 codes, symmetric, one F32 scale per row: scale = amax / 127
  kFp8,   // F8_E4M3 codes, one F32 scale per 128 × 128 block: scale = amax / 448 (DeepSeek-V3's layout)
  kInt4,  // U4 codes (q + 8), symmetric, one BF16 scale per row and 32 columns: scale = amax / 7.5,
          // q = clamp(round(w / scale), −8, 7) (compressed-tensors' and GPTQ's symmetric rule)
  // As kInt8 and kInt4, and the weight's GEMMs round activations to int8 per row (W8A8, W4A8):
  // faster on CPUs with VNNI, less exact (QuantScales::int8_activations).
  kInt8A8,
  kInt4A8,
};

// Whether `scheme` applies to `w`: a row-major float weight (int4: an even number of columns).
// QuantizedLayout and Quantize return `w` itself otherwise.
bool Quantizable(const Tensor& w, QuantScheme scheme);
// Storage a quantized copy of a weight lives in.
struct QuantizedStorage {
  std::vector<uint8_t> codes, scales;
};
// The quantized format of `w` under `scheme`, its data pointers placeholders: what a backend needs
// to size its prepared copy (`w` itself when the scheme does not apply).
Tensor QuantizedLayout(const Tensor& w, QuantScheme scheme);
// Quantizes row-major float weight `w` (F32, BF16 or F16) into `storage` and returns its view;
// scales are computed in float32 from the stored values. With a pool, rows (FP8: rows of blocks)
// are quantized side by side, to the same bytes.
Tensor Quantize(const Tensor& w, QuantScheme scheme, QuantizedStorage* storage, ThreadPool* pool = nullptr);

// Nearest FP8 e4m3fn code of a float (round to nearest even, saturating at ±448; NaN to 0x7f).
uint8_t F32ToF8E4M3(float f);

}  // namespace ls
