// Resolving a weight name to the tensor(s) a checkpoint stores it as, under its quantization
// (models/loader/quantization_config.h): `X.weight` as a float tensor; FP8 `X.weight` (F8_E4M3)
// with `X.weight_scale_inv` block scales; or compressed-tensors `X.weight_packed` with
// `X.weight_scale`, `X.weight_shape` and, when asymmetric, `X.weight_zero_point`. Every part is
// checked (dtypes, shapes, the stored shape, NaN codes and scales) before a kernel reads it, and the
// result is one Tensor carrying its format and scales.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/tensor.h"
#include "models/loader/quantization_config.h"
#include "models/loader/weight_store.h"

namespace ls {

struct BoundWeight {
  Tensor tensor;
  std::vector<std::string> names;  // every checkpoint tensor it was made from
};

// The rows and columns of a weight whose codes are read and checked: all of them by default; a
// tensor-parallel rank's part only, so that it reads no other rank's codes (-1: to the end).
struct CodeWindow {
  int64_t row0 = 0, rows = -1, col0 = 0, cols = -1;
};

// The weight `name` of shape [rows, cols] ([cols] when rows == 0; vectors are never quantized),
// its codes checked within `window`.
absl::StatusOr<BoundWeight> BindWeight(const WeightStore& store, const QuantizationConfig& q, const std::string& name,
                                       int64_t rows, int64_t cols, const CodeWindow& window = {});
// Whether BindWeight would find `name` (as itself or as its packed parts).
bool HasWeight(const WeightStore& store, const QuantizationConfig& q, const std::string& name);

}  // namespace ls
