// Minimal NumPy .npy I/O for float32 C-order arrays: logits dumps and golden files in tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ls {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

absl::Status WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data);
absl::StatusOr<NpyArray> ReadNpyF32(const std::string& path);

}  // namespace ls
