// Reading a config.json into a ModelConfig: the family its architecture and model_type name
// (FindFamily) reads the keys through its adapter, then the checks every family shares
// (quantization config, unread math keys, ValidateModelConfig).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/loader/model_config.h"

namespace ls {

// Parses config.json text with the adapter of the family its architecture (or model_type) names;
// `source` (a file path) prefixes every error message.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text, absl::string_view source);
// Reads and parses DIR/config.json.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);

}  // namespace ls
