// KvCache: the paged per-token storage of every layer, typed per layer by a KvLayerSpec (GQA:
// [num_blocks, block_size, Hkv, hd] for K and for V), float32 or BF16, in backend memory. Which
// block belongs to which sequence is decided by the engine's BlockManager; this class only owns
// the memory.
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

namespace ls {

// What one layer caches per token (GQA: Hkv · hd values of K and as many of V).
struct KvLayerSpec {
  int64_t k_width = 0;  // elements per token of K (0 with v_width: the layer caches nothing)
  int64_t v_width = 0;  // elements per token of V
};

class KvCache {
 public:
  // One spec per layer. dtype: kF32 or kBF16 (the CPU backend's attention reads both; CUDA's
  // float32 only).
  KvCache(Backend* backend, std::vector<KvLayerSpec> layers, int32_t num_blocks, int32_t block_size,
          DType dtype = DType::kF32);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  DType dtype() const { return dtype_; }
  int32_t num_layers() const { return static_cast<int32_t>(layers_.size()); }
  const KvLayerSpec& spec(int32_t i) const { return layers_[i]; }
  KvLayer layer(int32_t i) { return KvLayer{k_[i].data(), v_[i].data(), num_blocks_, block_size_, dtype_}; }
  // Bytes of one block across all layers.
  static size_t BytesPerBlock(const std::vector<KvLayerSpec>& layers, int32_t block_size, DType dtype = DType::kF32);

 private:
  std::vector<KvLayerSpec> layers_;
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
