// KvCache allocation and the choice of its element type.
#include "models/kv_cache.h"

#include <utility>
#include <vector>

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

size_t KvCache::BytesPerBlock(const std::vector<KvLayerSpec>& layers, int32_t block_size, DType dtype) {
  size_t values = 0;
  for (const KvLayerSpec& l : layers) values += static_cast<size_t>(l.k_width + l.v_width);
  return values * static_cast<size_t>(block_size) * DTypeSize(dtype);
}

size_t KvCache::BytesPerStateSlot(const std::vector<KvLayerSpec>& layers) {
  size_t floats = 0;
  for (const KvLayerSpec& l : layers) floats += static_cast<size_t>(l.state_floats);
  return floats * sizeof(float);
}

KvCache::KvCache(Backend* backend, std::vector<KvLayerSpec> layers, int32_t num_blocks, int32_t block_size,
                 DType dtype, int32_t num_state_slots)
    : backend_(backend),
      layers_(std::move(layers)),
      num_blocks_(num_blocks),
      block_size_(block_size),
      dtype_(dtype),
      num_state_slots_(num_state_slots) {
  const size_t per_value = static_cast<size_t>(num_blocks) * block_size * DTypeSize(dtype);
  for (const KvLayerSpec& l : layers_) {
    k_.push_back(l.k_width > 0 ? DeviceBuffer(backend, per_value * l.k_width) : DeviceBuffer(backend));
    v_.push_back(l.v_width > 0 ? DeviceBuffer(backend, per_value * l.v_width) : DeviceBuffer(backend));
    const size_t state = static_cast<size_t>(num_state_slots) * l.state_floats * sizeof(float);
    state_.push_back(state > 0 ? DeviceBuffer(backend, state) : DeviceBuffer(backend));
  }
}

void KvCache::CopyBytes(void* dst, const void* src, size_t bytes) {
  if (bytes % sizeof(float) == 0) {
    backend_->Copy(static_cast<float*>(dst), static_cast<const float*>(src), static_cast<int64_t>(bytes / sizeof(float)));
    return;
  }
  std::vector<char> host(bytes);  // an odd byte count (never with even head widths): through the host
  backend_->CopyToHost(host.data(), src, bytes);
  backend_->CopyToDevice(dst, host.data(), bytes);
}

absl::Status KvCache::Copy(const CacheCopy& c) {
  const int32_t limit = c.kind == CacheCopy::kState ? num_state_slots_ : num_blocks_;
  const char* what = c.kind == CacheCopy::kState ? "state slot" : "KV block";
  if (c.src < 0 || c.src >= limit || c.dst < 0 || c.dst >= limit)
    return absl::InvalidArgumentError(absl::StrCat("cache copy: ", what, " ", c.src, " -> ", c.dst, " out of range (",
                                                   limit, ")"));
  if (c.src == c.dst) return absl::OkStatus();
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (c.kind == CacheCopy::kState) {
      const size_t bytes = static_cast<size_t>(layers_[i].state_floats) * sizeof(float);
      if (bytes == 0) continue;
      char* base = static_cast<char*>(state_[i].data());
      CopyBytes(base + c.dst * bytes, base + c.src * bytes, bytes);
    } else {
      const size_t row = static_cast<size_t>(block_size_) * DTypeSize(dtype_);
      for (auto [buf, width] : {std::pair{&k_[i], layers_[i].k_width}, std::pair{&v_[i], layers_[i].v_width}}) {
        if (width == 0) continue;
        const size_t bytes = row * static_cast<size_t>(width);
        char* base = static_cast<char*>(buf->data());
        CopyBytes(base + c.dst * bytes, base + c.src * bytes, bytes);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ls
