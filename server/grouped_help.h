// --help for a program whose flags fall into topics: the usage message, then each topic's flags
// (name, help, default) under its title, as vLLM groups its arguments, without the source paths
// Abseil prints. Flags of the program that no topic names are listed last, under "Other".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ls::server {

struct FlagTopic {
  std::string title;
  std::vector<std::string> flags;  // in the order shown
};

std::string GroupedHelp(const std::string& usage, const std::vector<FlagTopic>& topics);

// True when the command line asks for help (--help, -help, --helpshort, -h); --helpfull is left
// to Abseil.
bool WantsHelp(int argc, char** argv);

}  // namespace ls::server
