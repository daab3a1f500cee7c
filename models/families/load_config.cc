// ParseModelConfig and LoadModelConfig: the family dispatch (see load_config.h).
#include "models/families/load_config.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/read_file.h"
#include "models/families/family.h"
#include "models/loader/config_reader.h"
#include "models/loader/math_keys.h"
#include "models/loader/quantization_config.h"
#include "nlohmann/json.hpp"

namespace ls {

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text, absl::string_view source) {
  using json = nlohmann::json;
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(source, ": invalid JSON"));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(source, ": expected a JSON object"));
  ModelConfig c;
  if (auto it = j.find("architectures"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->empty() || !(*it)[0].is_string())
      return absl::InvalidArgumentError(absl::StrCat(source, ": key 'architectures' must be a list of strings"));
    c.architecture = (*it)[0].get<std::string>();
  }
  if (auto it = j.find("model_type"); it != j.end() && it->is_string()) c.model_type = it->get<std::string>();
  const Family* family = FindFamily(c.architecture, c.model_type);
  if (!family) {
    std::vector<std::string> supported;  // each once: Kimi-K2 shares DeepSeek-V3's
    for (const Family* f : Families())
      if (std::find(supported.begin(), supported.end(), f->architectures[0]) == supported.end())
        supported.push_back(f->architectures[0]);
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": unsupported architecture \"", c.architecture.empty() ? c.model_type : c.architecture,
        "\" (supported: ", absl::StrJoin(supported, ", "), ")"));
  }
  c.family = family->name;
  ConfigReader r(j, std::string(source));
  r.Ignore({"architectures", "model_type"});
  family->read_config(r, &c);
  ReadQuantizationConfig(r, &c.quantization);
  if (!r.status().ok()) return r.status();
  c.unrecognized_keys = r.UnreadKeys();
  if (auto s = CheckUnreadMathKeys(j, c.unrecognized_keys, c.family, std::string(source)); !s.ok()) return s;
  if (auto s = ValidateModelConfig(c, source); !s.ok()) return s;
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseModelConfig(*text, path);
}

}  // namespace ls
