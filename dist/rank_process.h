// RankProcess: this process's place in a rank group — several latentserve processes that serve
// one model together, launched by mpirun (directly, or by a LeaderWorkerSet's leader from the
// group's pod addresses). It brings MPI up, knows this rank and the group's size, and leads one of
// the two lives a rank has: rank 0 (the leader) runs the front ends, the scheduler and the sampler
// and drives the group through leader_group(); the other ranks run WorkerLoop. A build without MPI
// has the same interface and joins no group (rank_process_single.cc).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dist/rank_timeouts.h"
#include "engine/rank_group.h"
#include "kernels/rank_transport.h"
#include "models/loader/model_config.h"
#include "models/model.h"

namespace ls::dist {

// The exit status of a rank whose group broke (the leader's too), so that an orchestrator
// restarts the group.
inline constexpr int kGroupFailedExit = 3;

class RankProcess {
 public:
  // The group mpirun launched this process into. Null when it runs alone (no launcher, or a group
  // of one); an error when a launcher started several ranks and this build has no MPI, or MPI
  // cannot start. Call once, before any thread starts.
  static absl::StatusOr<std::unique_ptr<RankProcess>> JoinIfLaunched(const RankTimeouts& timeouts);
  virtual ~RankProcess() = default;

  virtual int32_t rank() const = 0;
  virtual int32_t size() const = 0;
  virtual int32_t local_rank() const = 0;  // among the ranks on this host (picks the GPU)
  virtual RankTransport* transport() = 0;  // what the model and backend join

  // Tensor parallelism: splits the group into groups of `size` consecutive ranks that run the same
  // batches with their parts of the weights (collective; once, before the model loads). An error
  // when `size` does not divide the group or one group's ranks are not on one host.
  virtual absl::Status FormTensorGroups(int32_t size) = 0;
  // This rank's place in its tensor-parallel group ({0, 1} before FormTensorGroups), and the
  // group's transport, which the model joins (null for groups of one).
  virtual TensorParallel tensor_parallel() const = 0;
  virtual RankTransport* tensor_group() = 0;

  // Rank 0: the group its engine steps through (made on the first call; owned here).
  virtual RankGroup* leader_group(Model* model) = 0;
  // The workers as they reported at start, as JSON text ({"1": {"pid": ..., "host": ...}, ...}).
  virtual std::string workers_json() const = 0;
  // Ranks above 0: serve the leader until it stops the group or the group fails; the exit status.
  virtual int RunWorker(Model* model) = 0;
  // The orderly end (rank 0, after its engine is gone): the workers exit, MPI finalizes.
  virtual void Stop() = 0;
};

// Ends this process at once with `status` after flushing its output, without finalizing MPI
// (which could wait for a dead rank): the end of a broken group.
[[noreturn]] void ExitBrokenGroup(int status);

}  // namespace ls::dist
