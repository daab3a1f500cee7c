// Loading a tokenizer: the factories that pick the layout a model directory ships (a Hugging Face
// tokenizer.json or a tiktoken.model) and build the matching Tokenizer implementation. Apart from
// tokenizer.h so that the interface does not include its implementations.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tokenizer/tokenizer.h"

namespace ls::tok {

// Picks the tokenizer a model directory ships: tiktoken.model for Kimi models (config.json
// model_type kimi_k2, kimi_k3 or kimi_linear, which also selects Kimi's pre-tokenizer pattern),
// else tokenizer.json, else tiktoken.model with the pattern its model_type names.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& dir);
// A model directory, a tokenizer.json or a tiktoken.model (whose pattern comes from the
// config.json beside it).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerAt(const std::string& path);
// A Hugging Face tokenizer.json file, or its text.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerJsonFile(const std::string& path);
absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromJson(std::string_view json_text);

}  // namespace ls::tok
