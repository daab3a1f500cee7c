// SafetensorsWriter: writes named tensors to a .safetensors file (header sorted by name, padded
// to 8 bytes). Used by calibration output, benchmarks and tests that build model files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/dtype.h"

namespace ls {

class SafetensorsWriter {
 public:
  // Adds a tensor from float32 values, stored as `dtype` (rounded to nearest even).
  void Add(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values, DType dtype);
  // Adds a tensor from raw bytes already in `dtype`.
  void AddRaw(const std::string& name, std::vector<int64_t> shape, DType dtype, std::string bytes);
  absl::Status Write(const std::string& path) const;

 private:
  struct Item {
    std::vector<int64_t> shape;
    DType dtype;
    std::string bytes;
  };
  std::map<std::string, Item> items_;
};

}  // namespace ls
