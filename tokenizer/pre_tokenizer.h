// PreTokenizer: splits text into pre-tokens before BPE, as the Hugging Face `pre_tokenizer`
// section describes: Split (regex or string, with its behavior), ByteLevel (optional GPT-2 regex
// split, optional prefix space, then the byte-level alphabet), Metaspace (spaces to the
// replacement character, prepend_scheme always/first/never, optional split) and Sequence.
// Immutable after building; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace ls::tok {

// One pre-token. `at_start`: it begins at offset 0 of the encoded text (Metaspace's "first"
// prepend scheme adds its replacement character only there).
struct PreToken {
  std::string text;
  bool at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits every piece further (and may rewrite it, as ByteLevel does). Empty pieces are dropped.
  virtual std::vector<PreToken> Apply(std::vector<PreToken> pieces) const = 0;

  // Builds from the JSON object; unknown types and options give "unsupported: <component>".
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> FromJson(const nlohmann::json& j);
};

// The GPT-2 pre-tokenization pattern used by ByteLevel when use_regex is true.
extern const char kGpt2Pattern[];

}  // namespace ls::tok
