// Grouped --help from Abseil's flag registry.
#include "server/grouped_help.h"

#include <map>
#include <set>
#include <string_view>

#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ls::server {
namespace {

// "  --name (help); default: value;" with long help wrapped at 100 columns.
void AppendFlag(const absl::CommandLineFlag& flag, std::string* out) {
  std::string def = flag.DefaultValue();
  if (flag.IsOfType<std::string>()) def = absl::StrCat("\"", def, "\"");
  const std::string text = absl::StrCat("--", flag.Name(), " (", flag.Help(), "); default: ", def, ";");
  constexpr size_t kWidth = 100, kIndent = 2, kContinued = 6;
  size_t col = 0;
  std::string line(kIndent, ' ');
  for (size_t i = 0; i < text.size();) {
    size_t end = text.find(' ', i);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(i, end - i);
    if (col > 0 && line.size() + 1 + word.size() > kWidth) {
      absl::StrAppend(out, line, "\n");
      line.assign(kContinued, ' ');
      col = 0;
    }
    if (col > 0) line += ' ';
    line += word;
    ++col;
    i = end + 1;
  }
  absl::StrAppend(out, line, "\n");
}

}  // namespace

std::string GroupedHelp(const std::string& usage, const std::vector<FlagTopic>& topics) {
  std::string out = usage + "\n";
  std::set<std::string> shown;
  for (const FlagTopic& t : topics) {
    absl::StrAppend(&out, "\n", t.title, ":\n");
    for (const std::string& name : t.flags) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
      if (!flag) continue;
      AppendFlag(*flag, &out);
      shown.insert(name);
    }
  }
  std::map<std::string, const absl::CommandLineFlag*> rest;  // by name
  for (const auto& [name, flag] : absl::GetAllFlags())
    if (!absl::StrContains(flag->Filename(), "absl/") && !shown.count(std::string(name)))
      rest[std::string(name)] = flag;
  std::string other;
  for (const auto& [name, flag] : rest) AppendFlag(*flag, &other);
  if (!other.empty()) absl::StrAppend(&out, "\nOther:\n", other);
  absl::StrAppend(&out, "\n--helpfull lists Abseil's own flags as well.\n");
  return out;
}

bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--help" || a == "-help" || a == "--helpshort" || a == "-helpshort" || a == "-h") return true;
  }
  return false;
}

}  // namespace ls::server
