// KvCache: the caches of every layer, typed per layer by a KvLayerSpec — paged per-token storage
// (GQA: [num_blocks, block_size, Hkv, hd] for K and for V; MLA: one latent row), float32 or BF16,
// and for recurrent layers (KDA) one float32 state slot per running sequence — in backend
// memory. Which block and slot belong to which sequence the engine's BlockManager and StateSlots
// decide; this class only owns the memory.
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
#include "models/step_batch.h"

namespace ls {

// What one layer caches (GQA: Hkv · hd values of K and as many of V per token; MLA: a latent row
// per token; KDA: a state slot per sequence).
struct KvLayerSpec {
  int64_t k_width = 0;       // elements per token of K (0 with v_width: no per-token cache)
  int64_t v_width = 0;       // elements per token of V
  int64_t state_floats = 0;  // float32 values of recurrent state per sequence slot
};

class KvCache {
 public:
  // One spec per layer. dtype: kF32 or kBF16 (the CPU backend's attention reads both; CUDA's
  // float32 only).
  KvCache(Backend* backend, std::vector<KvLayerSpec> layers, int32_t num_blocks, int32_t block_size,
          DType dtype = DType::kF32, int32_t num_state_slots = 0);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  DType dtype() const { return dtype_; }
  int32_t num_layers() const { return static_cast<int32_t>(layers_.size()); }
  const KvLayerSpec& spec(int32_t i) const { return layers_[i]; }
  int32_t num_state_slots() const { return num_state_slots_; }
  KvLayer layer(int32_t i) {
    return KvLayer{k_[i].data(), v_[i].data(), num_blocks_, block_size_, dtype_,
                   static_cast<float*>(state_[i].data()), layers_[i].state_floats};
  }
  // Makes one copy inside the cache (a state slot onto another, or a block onto another, on every
  // layer that has one); InvalidArgument naming the id when one is out of range.
  absl::Status Copy(const CacheCopy& c);
  // Bytes of one block across all layers.
  static size_t BytesPerBlock(const std::vector<KvLayerSpec>& layers, int32_t block_size, DType dtype = DType::kF32);
  // Bytes of one sequence's state slot across all layers (0: the model keeps no state).
  static size_t BytesPerStateSlot(const std::vector<KvLayerSpec>& layers);

 private:
  void CopyBytes(void* dst, const void* src, size_t bytes);

  Backend* backend_;
  std::vector<KvLayerSpec> layers_;
  int32_t num_blocks_;
  int32_t block_size_;
  DType dtype_;
  int32_t num_state_slots_;
  std::vector<DeviceBuffer> k_, v_, state_;
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
