// ParseSpeculativeConfig and LoadDraftModel implementations.
#include "server/speculative_config.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "tokenizer/load_tokenizer.h"

namespace ls::server {

absl::StatusOr<SpeculativeFlag> ParseSpeculativeConfig(std::string_view text) {
  SpeculativeFlag flag;
  SpeculativeConfig& c = flag.config;
  if (text.empty()) return flag;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("--speculative_config must be a JSON object");
  auto integer = [&](const char* key, int32_t* out) -> absl::Status {
    if (!j.contains(key)) return absl::OkStatus();
    if (!j[key].is_number_integer())
      return absl::InvalidArgumentError(absl::StrCat("--speculative_config: '", key, "' must be an integer"));
    *out = j[key].get<int32_t>();
    return absl::OkStatus();
  };
  for (const auto& [key, value] : j.items())
    if (key != "method" && key != "num_speculative_tokens" && key != "prompt_lookup_min" &&
        key != "prompt_lookup_max" && key != "model")
      return absl::InvalidArgumentError(absl::StrCat("--speculative_config: unknown key '", key,
                                                     "' (method, num_speculative_tokens, prompt_lookup_min, "
                                                     "prompt_lookup_max, model)"));
  const std::string method = j.contains("method") && j["method"].is_string() ? j["method"].get<std::string>() : "";
  if (method != "ngram" && method != "draft_model" && method != "mtp")
    return absl::InvalidArgumentError(
        absl::StrCat("--speculative_config: method '", method,
                     "' is not supported; \"ngram\" (prompt lookup), \"draft_model\" (with \"model\": a "
                     "model directory) and \"mtp\" (the checkpoint's multi-token-prediction layer) are"));
  if (!j.contains("num_speculative_tokens"))
    return absl::InvalidArgumentError("--speculative_config: num_speculative_tokens is required");
  if (absl::Status st = integer("num_speculative_tokens", &c.num_speculative_tokens); !st.ok()) return st;
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > 16)
    return absl::InvalidArgumentError(absl::StrCat(
        "--speculative_config: num_speculative_tokens must be in [1, 16], got ", c.num_speculative_tokens));
  if (method != "ngram")
    for (const char* key : {"prompt_lookup_min", "prompt_lookup_max"})
      if (j.contains(key))
        return absl::InvalidArgumentError(
            absl::StrCat("--speculative_config: '", key, "' applies to method \"ngram\", not \"", method, "\""));
  if (method == "mtp") {
    if (j.contains("model"))
      return absl::InvalidArgumentError(
          "--speculative_config: method \"mtp\" reads the served checkpoint's own layer; 'model' applies to "
          "\"draft_model\"");
    flag.mtp = true;
    return flag;
  }
  if (method == "draft_model") {
    if (!j.contains("model") || !j["model"].is_string() || j["model"].get<std::string>().empty())
      return absl::InvalidArgumentError(
          "--speculative_config: method \"draft_model\" needs \"model\": the draft model's directory");
    flag.draft_model_dir = j["model"].get<std::string>();
    return flag;
  }
  if (j.contains("model"))
    return absl::InvalidArgumentError("--speculative_config: 'model' applies to method \"draft_model\", not \"ngram\"");
  for (auto [key, out] :
       {std::pair{"prompt_lookup_min", &c.prompt_lookup_min}, std::pair{"prompt_lookup_max", &c.prompt_lookup_max}})
    if (absl::Status st = integer(key, out); !st.ok()) return st;
  if (!j.contains("prompt_lookup_max")) c.prompt_lookup_max = std::max(c.prompt_lookup_max, c.prompt_lookup_min);
  if (c.prompt_lookup_min < 1 || c.prompt_lookup_max < c.prompt_lookup_min)
    return absl::InvalidArgumentError(
        absl::StrCat("--speculative_config: 1 <= prompt_lookup_min <= prompt_lookup_max must hold, got ",
                     c.prompt_lookup_min, ", ", c.prompt_lookup_max));
  return flag;
}

absl::StatusOr<std::unique_ptr<Model>> LoadDraftModel(const std::string& dir, Backend* backend, const Model& target,
                                                      const tok::Tokenizer* target_tokenizer) {
  auto model = LoadModel(dir, backend);
  if (!model.ok()) return absl::InvalidArgumentError(absl::StrCat("draft model ", dir, ": ", model.status().message()));
  auto differs = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft model ", dir, " does not share the served model's vocabulary: ", what));
  };
  if (!target_tokenizer) {
    if ((*model)->config().vocab_size != target.config().vocab_size)
      return differs(absl::StrCat("vocab_size ", (*model)->config().vocab_size, ", the served model's ",
                                  target.config().vocab_size));
    return model;
  }
  if (!std::filesystem::exists(dir + "/tokenizer.json") && !std::filesystem::exists(dir + "/tiktoken.model"))
    return differs("it has no tokenizer (tokenizer.json or tiktoken.model) to compare");
  auto tokenizer = tok::LoadTokenizer(dir);
  if (!tokenizer.ok())
    return absl::InvalidArgumentError(absl::StrCat("draft model ", dir, ": ", tokenizer.status().message()));
  const tok::Tokenizer& draft = **tokenizer;
  if (draft.vocab_size() != target_tokenizer->vocab_size())
    return differs(absl::StrCat("its tokenizer has ", draft.vocab_size(), " tokens, the served model's ",
                                target_tokenizer->vocab_size()));
  std::string a, b;
  for (int32_t id = 0; id < draft.vocab_size(); ++id) {
    a.clear();
    b.clear();
    const bool has_a = draft.AppendTokenBytes(id, false, &a), has_b = target_tokenizer->AppendTokenBytes(id, false, &b);
    if (has_a != has_b || a != b || draft.IsSpecial(id) != target_tokenizer->IsSpecial(id))
      return differs(absl::StrCat(
          "token ", id, " is ", nlohmann::json(a).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
          " there and ", nlohmann::json(b).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), " here"));
  }
  return model;
}

}  // namespace ls::server
