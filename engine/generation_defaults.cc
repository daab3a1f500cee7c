// GenerationDefaults: reading generation_config.json and applying it.
#include "engine/generation_defaults.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/read_file.h"
#include "nlohmann/json.hpp"

namespace ls {
namespace {

using json = nlohmann::json;

absl::Status Bad(const std::string& path, const std::string& key, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": '", key, "' ", what));
}

}  // namespace

bool GenerationDefaults::empty() const {
  return !temperature && !top_p && !min_p && !repetition_penalty && !top_k && !max_tokens && eos_token_ids.empty();
}

absl::StatusOr<GenerationDefaults> GenerationDefaults::FromModelDir(const std::string& dir) {
  const std::string path = dir + "/generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return GenerationDefaults{};
  return FromFile(path);
}

absl::StatusOr<GenerationDefaults> GenerationDefaults::FromFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  const json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": invalid JSON"));
  GenerationDefaults d;
  for (auto [key, out] : {std::pair<const char*, std::optional<float>*>{"temperature", &d.temperature},
                          {"top_p", &d.top_p},
                          {"min_p", &d.min_p},
                          {"repetition_penalty", &d.repetition_penalty}}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number()) return Bad(path, key, "must be a number");
    *out = it->get<float>();
  }
  for (auto [key, out] :
       {std::pair<const char*, std::optional<int32_t>*>{"top_k", &d.top_k}, {"max_new_tokens", &d.max_tokens}}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number_integer()) return Bad(path, key, "must be an integer");
    *out = it->get<int32_t>();
  }
  if (auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
    const json ids = it->is_array() ? *it : json::array({*it});
    for (const json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0) return Bad(path, "eos_token_id", "must be token ids");
      d.eos_token_ids.push_back(id.get<int32_t>());
    }
  }
  // Sampling values are checked as a request's would be (and so are refused at start, not per request).
  SamplingParams p;
  ApplyGenerationDefaults(d, {}, {}, &p);
  if (d.max_tokens && *d.max_tokens < 1) return Bad(path, "max_new_tokens", "must be at least 1");
  if (auto st = p.Validate(INT32_MAX); !st.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", st.message()));
  return d;
}

std::string GenerationDefaults::Describe() const {
  json j = json::object();
  // As written in the file (0.8, not the float's 0.800000011920929).
  auto number = [](float v) { return std::stod(absl::StrFormat("%.7g", v)); };
  if (temperature) j["temperature"] = number(*temperature);
  if (top_p) j["top_p"] = number(*top_p);
  if (top_k) j["top_k"] = *top_k;
  if (min_p) j["min_p"] = number(*min_p);
  if (repetition_penalty) j["repetition_penalty"] = number(*repetition_penalty);
  if (max_tokens) j["max_tokens"] = *max_tokens;
  if (!eos_token_ids.empty()) j["eos_token_ids"] = eos_token_ids;
  const std::string s = j.dump();
  return s.substr(1, s.size() - 2);
}

void ApplyGenerationDefaults(const GenerationDefaults& d, const SampledFields& given,
                             const std::vector<int32_t>& model_eos, SamplingParams* p) {
  if (d.temperature && !given.temperature) p->temperature = *d.temperature;
  if (d.top_p && !given.top_p) p->top_p = *d.top_p;
  if (d.top_k && !given.top_k) p->top_k = *d.top_k;
  if (d.min_p && !given.min_p) p->min_p = *d.min_p;
  if (d.repetition_penalty && !given.repetition_penalty) p->repetition_penalty = *d.repetition_penalty;
  if (p->ignore_eos) return;
  for (int32_t id : d.eos_token_ids) {
    const bool known = std::find(model_eos.begin(), model_eos.end(), id) != model_eos.end() ||
                       std::find(p->stop_token_ids.begin(), p->stop_token_ids.end(), id) != p->stop_token_ids.end();
    if (!known) p->stop_token_ids.push_back(id);
  }
}

int64_t DefaultMaxTokens(const GenerationDefaults& d, bool chat, int64_t prompt_len, int64_t max_model_len) {
  if (!chat) return 16;
  const int64_t room = max_model_len - prompt_len;
  return d.max_tokens ? std::min<int64_t>(room, *d.max_tokens) : room;
}

}  // namespace ls
