// PostProcessor: the `post_processor` section of a tokenizer.json for one sequence —
// TemplateProcessing (special-token ids around $A, e.g. Llama-3's <|begin_of_text|>), ByteLevel
// (offsets only: no ids) and Sequence of these — applied when add_special_tokens is set.
// Immutable after building; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace ls::tok {

class PostProcessor {
 public:
  // `j` null gives the identity. Unknown types give "unsupported: post_processor <type>".
  static absl::StatusOr<PostProcessor> FromJson(const nlohmann::json& j);

  // Wraps the ids of one encoded sequence.
  void Apply(std::vector<int32_t>* ids) const;
  const std::vector<int32_t>& prefix() const { return prefix_; }
  const std::vector<int32_t>& suffix() const { return suffix_; }

 private:
  absl::Status Add(const nlohmann::json& j);
  std::vector<int32_t> prefix_, suffix_;
};

}  // namespace ls::tok
