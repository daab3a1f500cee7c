// Normalizer: the `normalizer` section of a tokenizer.json — NFC, NFD, NFKC, NFKD, Prepend,
// Replace (string or regex) and Sequence — applied to each stretch of text between added tokens,
// as Hugging Face `tokenizers` does. Unicode normalization is pinned to that library's (older)
// Unicode tables: code points it does not know pass through unchanged and break composition.
// Immutable after building; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace ls::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(std::string* text) const = 0;

  // Builds from a non-null JSON object; unknown types give "unsupported: normalizer <type>".
  static absl::StatusOr<std::unique_ptr<Normalizer>> FromJson(const nlohmann::json& j);
};

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// Unicode normalization of valid UTF-8 (NUL included) as Hugging Face `tokenizers` 0.23 does it.
std::string NormalizeUnicode(std::string_view text, NormalForm form);

}  // namespace ls::tok
