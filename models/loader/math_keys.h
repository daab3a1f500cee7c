// The config keys that change a model's math in some family (biases, sliding windows, RoPE
// scaling, activations, logit and embedding scales, soft-capping, extra norms, shared experts).
// A family that does not read such a key would silently run other math if the checkpoint set it,
// so a key of this list that the family left unread is a load error when its value is not the
// neutral one (false, null, 0, 1, "silu", ...). Keys the family reads are its own business.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace ls {

// OK, or an error naming the first unread math key with a non-neutral value, its value and the
// family. `unread`: the key paths the family's adapter neither read nor ignored ("a.b" for nested).
absl::Status CheckUnreadMathKeys(const nlohmann::json& config, const std::vector<std::string>& unread,
                                 const std::string& family, const std::string& source);

}  // namespace ls
