// Makes --help of a LatentServe program list the program's own flags (Abseil by default lists
// only flags defined in a file named after the program).
#pragma once

#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace ls {

inline void ShowOwnFlagsInHelp() {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) { return !absl::StrContains(file, "absl/"); };
  absl::SetFlagsUsageConfig(config);
}

}  // namespace ls
