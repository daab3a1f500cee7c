// KvCache: the paged key/value storage of every layer, [num_blocks, block_size, Hkv, hd] float32
// per layer for K and V, in backend memory. Which block belongs to which sequence is decided by
// the engine's BlockManager; this class only owns the memory.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/device_buffer.h"
#include "kernels/ops.h"
#include "models/loader/model_config.h"

namespace ls {

class KvCache {
 public:
  KvCache(Backend* backend, const ModelConfig& config, int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  KvLayer layer(int32_t i) {
    return KvLayer{static_cast<float*>(k_[i].data()), static_cast<float*>(v_[i].data()), num_blocks_, block_size_};
  }
  // Bytes of one block across all layers (K and V).
  static size_t BytesPerBlock(const ModelConfig& config, int32_t block_size);

 private:
  int32_t num_blocks_;
  int32_t block_size_;
  std::vector<DeviceBuffer> k_, v_;
};

}  // namespace ls
