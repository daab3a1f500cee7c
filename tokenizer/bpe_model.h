// BpeModel: the BPE `model` section of a tokenizer.json — vocabulary, ranked merges (both the
// "a b" and ["a", "b"] forms), unk token with fuse_unk, byte_fallback to <0xXX> tokens and
// ignore_merges — turning one pre-token into ids by always applying the lowest-ranked merge
// (leftmost on ties).
// Keeps a bounded cache of pre-token → ids; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "nlohmann/json_fwd.hpp"

namespace ls::tok {

class BpeModel {
 public:
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& j);

  // Appends the ids of one pre-token.
  void Tokenize(const std::string& piece, std::vector<int32_t>* ids) const;

  int32_t TokenToId(std::string_view token) const {
    auto it = vocab_.find(absl::string_view(token.data(), token.size()));
    return it == vocab_.end() ? -1 : it->second;
  }
  // The vocabulary string of `id`, or nullptr.
  const std::string* IdToToken(int32_t id) const {
    return id >= 0 && id < static_cast<int32_t>(id_to_token_.size()) && !id_to_token_[id].empty() ? &id_to_token_[id]
                                                                                                  : nullptr;
  }
  int32_t size() const { return static_cast<int32_t>(id_to_token_.size()); }
  bool byte_fallback() const { return byte_fallback_; }
  bool fuse_unk() const { return fuse_unk_; }

  size_t cache_hits() const {
    MutexLock lock(&cache_mu_);
    return cache_hits_;
  }

 private:
  BpeModel() = default;
  void TokenizeUncached(const std::string& piece, std::vector<int32_t>* ids) const;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  // (left id, right id) packed into 64 bits -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_{};  // id of <0xXX> per byte, or -1

  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kMaxCachedPiece = 256;  // bytes
  mutable Mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_ ABSL_GUARDED_BY(cache_mu_);
  mutable size_t cache_hits_ ABSL_GUARDED_BY(cache_mu_) = 0;
};

}  // namespace ls::tok
