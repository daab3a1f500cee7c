// Command-line helpers shared by the LatentServe programs: --help lists the program's own flags
// (Abseil by default lists only flags defined in a file named after the program), --version prints
// the release, and flags may be spelled with dashes (--max-tokens) as well as underscores
// (--max_tokens).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "base/version.h"

namespace ls {

inline void ShowOwnFlagsInHelp() {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) { return !absl::StrContains(file, "absl/"); };
  config.version_string = [] { return std::string("LatentServe ") + kVersion + "\n"; };
  absl::SetFlagsUsageConfig(config);
}

// absl::ParseCommandLine after turning dashes in flag names (not in values) into underscores.
inline void ParseCommandLineAcceptingDashes(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::vector<char*> fixed;
  for (auto& a : args) {
    if (a.rfind("--", 0) == 0)
      for (size_t i = 2; i < std::min(a.find('='), a.size()); ++i)
        if (a[i] == '-') a[i] = '_';
    fixed.push_back(a.data());
  }
  absl::ParseCommandLine(static_cast<int>(fixed.size()), fixed.data());
}

}  // namespace ls
