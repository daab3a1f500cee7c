// Regex: a compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) that lists the
// byte ranges of its matches in UTF-8 text, for the Split and ByteLevel pre-tokenizers.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ls::tok {

class Regex {
 public:
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-overlapping matches [begin, end) from left to right; `text` must be valid UTF-8.
  // Thread-safe.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace ls::tok
