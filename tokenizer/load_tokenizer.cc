// The tokenizer factories (see load_tokenizer.h): which layout a model directory ships, and
// loading it.
#include "tokenizer/load_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/read_file.h"
#include "nlohmann/json.hpp"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tiktoken_patterns.h"
#include "tokenizer/tiktoken_tokenizer.h"

namespace ls::tok {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool IsKimi(const std::string& model_type) {
  return model_type == "kimi_k2" || model_type == "kimi_k3" || model_type == "kimi_linear";
}

// config.json's model_type (or its text_config's), "" when the file or key is absent.
absl::StatusOr<std::string> ModelType(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::string();
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": invalid JSON"));
  if (j.contains("model_type") && j["model_type"].is_string()) return j["model_type"].get<std::string>();
  if (j.contains("text_config") && j["text_config"].is_object() && j["text_config"].contains("model_type") &&
      j["text_config"]["model_type"].is_string())
    return j["text_config"]["model_type"].get<std::string>();
  return std::string();
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTiktoken(const std::string& model_path) {
  const std::string dir = fs::path(model_path).parent_path().string();
  auto type = ModelType(dir.empty() ? "." : dir);
  if (!type.ok()) return type.status();
  if (type->empty())
    return absl::InvalidArgumentError(absl::StrCat(
        model_path, ": a tiktoken.model needs the config.json beside it, whose model_type selects the pre-tokenizer"));
  auto pattern = TiktokenPatternFor(*type);
  if (!pattern.ok())
    return absl::Status(pattern.status().code(), absl::StrCat(model_path, ": ", pattern.status().message()));
  auto t = TiktokenTokenizer::Load(model_path, (fs::path(dir) / "tokenizer_config.json").string(), *pattern);
  if (!t.ok()) return t.status();
  return std::unique_ptr<Tokenizer>(std::move(*t));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  const bool has_json = fs::is_regular_file(d / "tokenizer.json", ec);
  const bool has_tiktoken = fs::is_regular_file(d / "tiktoken.model", ec);
  if (has_tiktoken) {
    auto type = ModelType(dir);
    if (!type.ok()) return type.status();
    if (IsKimi(*type) || !has_json) return LoadTiktoken((d / "tiktoken.model").string());
  }
  if (has_json) return LoadTokenizerJsonFile((d / "tokenizer.json").string());
  return absl::NotFoundError(absl::StrCat(dir, ": no tokenizer.json or tiktoken.model"));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerAt(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return LoadTokenizer(path);
  if (fs::path(path).extension() == ".model") return LoadTiktoken(path);
  return LoadTokenizerJsonFile(path);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerJsonFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto t = TokenizerFromJson(*text);
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromJson(std::string_view json_text) {
  auto t = HfTokenizer::FromJson(json_text);
  if (!t.ok()) return t.status();
  return std::unique_ptr<Tokenizer>(std::move(*t));
}

}  // namespace ls::tok
