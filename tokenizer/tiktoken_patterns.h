// Pre-tokenizer patterns for tiktoken.model vocabularies, keyed by the model_type of the
// config.json beside them, written for PCRE2 (which has no character-class intersection).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace ls::tok {

// Kimi K2 / K3 / Kimi-Linear's Han-aware pattern (tokenization_kimi.py pat_str), rewritten
// without `&&`; tiktoken_patterns.cc shows the original and the rewrite.
extern const char kKimiPattern[];

// The pattern for a model_type (kimi_k2, kimi_k3, kimi_linear), or NotFound naming it.
absl::StatusOr<std::string> TiktokenPatternFor(const std::string& model_type);

}  // namespace ls::tok
