// KvCache allocation and the choice of its element type.
#include "models/kv_cache.h"

#include "absl/strings/str_cat.h"

namespace ls {

absl::StatusOr<DType> ChooseKvCacheDType(std::optional<DType> requested, DType checkpoint, const Backend& backend) {
  if (!requested)
    return checkpoint == DType::kBF16 && backend.SupportsKvCacheDType(DType::kBF16) ? DType::kBF16 : DType::kF32;
  if (*requested != DType::kF32 && *requested != DType::kBF16)
    return absl::InvalidArgumentError(absl::StrCat("kv_cache_dtype ", std::string(DTypeName(*requested)),
                                                   " is not supported: float32 or bfloat16"));
  if (!backend.SupportsKvCacheDType(*requested))
    return absl::InvalidArgumentError(absl::StrCat("kv_cache_dtype ", KvCacheDTypeName(*requested),
                                                   " is not supported by the ", std::string(backend.name()),
                                                   " backend (float32 is)"));
  return *requested;
}

absl::StatusOr<std::optional<DType>> ParseKvCacheDType(absl::string_view text) {
  if (text == "auto") return std::optional<DType>();
  if (text == "float32") return std::optional<DType>(DType::kF32);
  if (text == "bfloat16") return std::optional<DType>(DType::kBF16);
  return absl::InvalidArgumentError(
      absl::StrCat("kv_cache_dtype must be auto, float32 or bfloat16, got '", text, "'"));
}

std::string KvCacheDTypeName(DType dtype) { return dtype == DType::kBF16 ? "bfloat16" : "float32"; }

namespace {

// Bytes of one block of one layer's keys (or values).
size_t LayerBlockBytes(const ModelConfig& c, int32_t block_size, DType dtype) {
  return static_cast<size_t>(block_size) * c.num_key_value_heads * c.head_dim * DTypeSize(dtype);
}

}  // namespace

size_t KvCache::BytesPerBlock(const ModelConfig& c, int32_t block_size, DType dtype) {
  return 2 * static_cast<size_t>(c.num_hidden_layers) * LayerBlockBytes(c, block_size, dtype);
}

KvCache::KvCache(Backend* backend, const ModelConfig& c, int32_t num_blocks, int32_t block_size, DType dtype)
    : num_blocks_(num_blocks), block_size_(block_size), dtype_(dtype) {
  const size_t bytes = static_cast<size_t>(num_blocks) * LayerBlockBytes(c, block_size, dtype);
  for (int32_t i = 0; i < c.num_hidden_layers; ++i) {
    k_.emplace_back(backend, bytes);
    v_.emplace_back(backend, bytes);
  }
}

}  // namespace ls
