// KvCache allocation.
#include "models/kv_cache.h"

namespace ls {

size_t KvCache::BytesPerBlock(const ModelConfig& c, int32_t block_size) {
  return 2 * static_cast<size_t>(c.num_hidden_layers) * block_size * c.num_key_value_heads * c.head_dim * sizeof(float);
}

KvCache::KvCache(Backend* backend, const ModelConfig& c, int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  const size_t bytes = static_cast<size_t>(num_blocks) * block_size * c.num_key_value_heads * c.head_dim * sizeof(float);
  for (int32_t i = 0; i < c.num_hidden_layers; ++i) {
    k_.emplace_back(backend, bytes);
    v_.emplace_back(backend, bytes);
  }
}

}  // namespace ls
