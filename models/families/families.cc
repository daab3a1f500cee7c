// The family list: registering a family is one line here.
#include "models/families/families.h"

namespace ls {

const std::vector<const Family*>& Families() {
  static const std::vector<const Family*> families = {&kStableLatentMoe, &kQwen3Moe,   &kQwen2Moe, &kMixtral,
                                                      &kGlm4Moe,         &kDeepseekV3, &kDeepseekV2, &kKimiLinear, &kKimiK3};
  return families;
}

const Family* FindFamily(const std::string& architecture, const std::string& model_type) {
  // A config.json naming neither is this project's own format, as it was first written.
  if (architecture.empty() && model_type.empty()) return &kStableLatentMoe;
  for (const Family* f : Families())
    for (const std::string& a : f->architectures)
      if (a == architecture) return f;
  if (!architecture.empty()) return nullptr;
  for (const Family* f : Families())
    for (const std::string& t : f->model_types)
      if (t == model_type) return f;
  return nullptr;
}

}  // namespace ls
