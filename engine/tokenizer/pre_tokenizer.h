// PreTokenizer: splits text into pre-tokens before BPE, as the Hugging Face `pre_tokenizer`
// section describes: Split (regex, with its behavior), ByteLevel (optional GPT-2 regex split,
// optional prefix space, then the byte-level alphabet), and Sequence of those.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace ls::tok {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits every piece further (and may rewrite it, as ByteLevel does).
  virtual std::vector<std::string> Apply(std::vector<std::string> pieces) const = 0;
  // Whether the pieces come out in the byte-level alphabet (the decoder must then reverse it).
  virtual bool is_byte_level() const { return false; }

  // Builds from the JSON object; unknown types and options give "unsupported: <component>".
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> FromJson(const nlohmann::json& j);
};

// The GPT-2 pre-tokenization pattern used by ByteLevel when use_regex is true.
extern const char kGpt2Pattern[];

}  // namespace ls::tok
