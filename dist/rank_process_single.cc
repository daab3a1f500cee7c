// RankProcess in a build without MPI: every process runs alone; one that a launcher started as
// one of several ranks is refused with the reason, rather than serving a model its peers share.
#include "absl/strings/str_cat.h"
#include "dist/launch_env.h"
#include "dist/rank_process.h"

namespace ls::dist {

absl::StatusOr<std::unique_ptr<RankProcess>> RankProcess::JoinIfLaunched(const RankTimeouts&) {
  if (const int n = LaunchedGroupSize(); n > 1)
    return absl::FailedPreconditionError(
        absl::StrCat("a launcher started this process as one of ", n,
                     " ranks, but this latentserve was built without MPI (install libopenmpi-dev and rebuild with "
                     "-DLATENTSERVE_MPI=ON)"));
  return std::unique_ptr<RankProcess>();
}

}  // namespace ls::dist
