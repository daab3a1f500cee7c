// SafetensorsFile: one .safetensors file mapped read-only with mmap, its header parsed and every
// entry checked (known dtype, shape × dtype size = byte range, range inside the file, no overlap;
// dtypes: F32, BF16, F16, and for quantized weights F8_E4M3, F8_E8M0, U8, I8, I32, I64)
// before any tensor is handed out. A truncated or lying file is an error, never a crash. Opened
// for its header only, a file (complete, or a shapes-only file that stops after its header) has
// every tensor read as zeros from memory that holds none of its bytes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/dtype.h"

namespace ls {

struct TensorEntry {
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;  // inside the mapping
  size_t bytes;
};

class SafetensorsFile {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path, bool header_only = false);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // nullptr when the file holds no tensor of that name.
  const TensorEntry* Find(const std::string& name) const;
  const std::map<std::string, TensorEntry>& entries() const { return entries_; }

  // Parses a header given the whole file's bytes; exposed for fuzzing and tests.
  static absl::StatusOr<std::map<std::string, TensorEntry>> ParseHeader(const unsigned char* file,
                                                                        size_t file_size,
                                                                        const std::string& path);

 private:
  SafetensorsFile() = default;
  // Header-only: the header read from `fd` into anonymous memory as long as the data it describes;
  // its size, and *map set.
  static absl::StatusOr<size_t> HeaderOnlyMapping(int fd, const std::string& path, size_t file_size, void** map);
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, TensorEntry> entries_;
};

}  // namespace ls
