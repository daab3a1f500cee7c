// The family list: registering a family is one line here.
#include "models/families/families.h"

#include <algorithm>

namespace ls {

const std::vector<const Family*>& Families() {
  static const std::vector<const Family*> families = {&kStableLatentMoe, &kQwen3Moe,   &kQwen3,     &kQwen2Moe, &kMixtral,
                                                      &kGlm4Moe,         &kDeepseekV3, &kKimiK2, &kDeepseekV2, &kKimiLinear, &kKimiK3};
  return families;
}

const Family* FindFamily(const std::string& architecture, const std::string& model_type) {
  // A config.json naming neither is this project's own format, as it was first written.
  if (architecture.empty() && model_type.empty()) return &kStableLatentMoe;
  auto lists = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  const Family* by_architecture = nullptr;
  for (const Family* f : Families()) {
    if (!lists(f->architectures, architecture)) continue;
    if (lists(f->model_types, model_type)) return f;
    if (!by_architecture) by_architecture = f;
  }
  if (by_architecture || !architecture.empty()) return by_architecture;
  for (const Family* f : Families())
    if (lists(f->model_types, model_type)) return f;
  return nullptr;
}

}  // namespace ls
