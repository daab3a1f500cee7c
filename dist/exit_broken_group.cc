// ExitBrokenGroup: the end of a process whose rank group broke.
#include <unistd.h>

#include <cstdio>

#include "dist/rank_process.h"

namespace ls::dist {

void ExitBrokenGroup(int status) {
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(status);
}

}  // namespace ls::dist
