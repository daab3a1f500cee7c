// PositionalArgs: the benchmark programs' arguments, read in order, each with its default. A
// count that is not a whole number in its range, a flag the program does not know, or more
// arguments than it reads is refused by name with the usage (exit status 2) before anything runs;
// --help prints the usage (exit status 0). Header-only: each benchmark is one file.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

namespace ls::bench {

class PositionalArgs {
 public:
  // `usage`: the program's synopsis, e.g. "gemm_bench [N [K]]".
  PositionalArgs(int argc, char** argv, const char* usage) : argc_(argc), argv_(argv), usage_(usage) {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--help" || a == "-h") {
        std::printf("usage: %s\n", usage_);
        std::exit(0);
      }
      if (a.rfind("--", 0) == 0) Refuse(("unknown flag " + a).c_str());
    }
  }

  // The next argument as a whole number in [min, max], or `def` when there is none.
  int64_t Int(const char* name, int64_t def, int64_t min, int64_t max = std::numeric_limits<int64_t>::max()) {
    if (next_ >= argc_) return def;
    const char* text = argv_[next_++];
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || v < min || v > max)
      Refuse((std::string(name) + " must be a whole number in [" + std::to_string(min) + ", " +
              (max == std::numeric_limits<int64_t>::max() ? std::string("...") : std::to_string(max)) + "], got '" +
              text + "'")
                 .c_str());
    return v;
  }

  // The next argument as text, or `def` when there is none.
  std::string Str(const char* /*name*/, std::string def) { return next_ < argc_ ? argv_[next_++] : def; }

  // After the last read: an argument left over is refused.
  void End() const {
    if (next_ < argc_) Refuse((std::string("unexpected argument '") + argv_[next_] + "'").c_str());
  }

 private:
  [[noreturn]] void Refuse(const char* why) const {
    std::fprintf(stderr, "%s: %s\nusage: %s\n", argv_[0], why, usage_);
    std::exit(2);
  }

  int argc_;
  char** argv_;
  const char* usage_;
  int next_ = 1;
};

}  // namespace ls::bench
