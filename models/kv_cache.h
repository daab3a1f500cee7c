// KvCache: the paged key/value storage of every layer, [num_blocks, block_size, Hkv, hd] per
// layer for K and V, float32 or BF16, in backend memory. Which block belongs to which sequence is
// decided by the engine's BlockManager; this class only owns the memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "kernels/backend.h"
#include "kernels/device_buffer.h"
#include "kernels/ops.h"
#include "models/loader/model_config.h"

namespace ls {

class KvCache {
 public:
  // dtype: kF32 or kBF16 (the CPU backend's attention reads both; CUDA's float32 only).
  KvCache(Backend* backend, const ModelConfig& config, int32_t num_blocks, int32_t block_size,
          DType dtype = DType::kF32);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  DType dtype() const { return dtype_; }
  KvLayer layer(int32_t i) { return KvLayer{k_[i].data(), v_[i].data(), num_blocks_, block_size_, dtype_}; }
  // Bytes of one block across all layers (K and V).
  static size_t BytesPerBlock(const ModelConfig& config, int32_t block_size, DType dtype = DType::kF32);

 private:
  int32_t num_blocks_;
  int32_t block_size_;
  DType dtype_;
  std::vector<DeviceBuffer> k_, v_;
};

// The KV cache element type to use: `requested`, or when unset ("auto") BF16 for a BF16
// checkpoint where the backend's attention supports it, else float32. InvalidArgument, naming
// the type and the backend, where the backend does not support the requested one.
absl::StatusOr<DType> ChooseKvCacheDType(std::optional<DType> requested, DType checkpoint, const Backend& backend);
// The option's text: "auto" (unset), "float32" or "bfloat16"; InvalidArgument naming the text else.
absl::StatusOr<std::optional<DType>> ParseKvCacheDType(absl::string_view text);
// "float32" or "bfloat16", as the option spells them.
std::string KvCacheDTypeName(DType dtype);

}  // namespace ls
