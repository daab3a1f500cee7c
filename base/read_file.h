// ReadFile: a whole file's bytes, for the configuration, tokenizer and template files the loaders
// parse. A file that cannot be opened is NotFound naming its path.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace ls {

inline absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ls
