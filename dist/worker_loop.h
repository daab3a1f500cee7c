// WorkerLoop: a worker rank's life once its model is loaded — it waits for the leader's messages
// and carries them out: makes its KV cache and installs the initial expert placement (start),
// builds each new placement's share in the background and switches to it when told, runs its
// batch of every step and replies with its logits rows and the expert counts it recorded, and
// answers heartbeats. It ends on the leader's stop (status 0), or when the group fails — the
// leader gone or silent past the deadline, an MPI error — with status kGroupFailedExit, never
// waiting unbounded. Owns the worker's cache; one thread (the process's main thread).
#pragma once

#include <memory>
#include <thread>

#include "base/mutex.h"
#include "dist/communicator.h"
#include "dist/rank_process.h"
#include "dist/rank_timeouts.h"
#include "dist/step_message.h"
#include "models/kv_cache.h"
#include "models/model.h"

namespace ls::dist {

class WorkerLoop {
 public:
  // `model` is joined to `comm` already; both outlive the loop.
  WorkerLoop(Model* model, Communicator* comm, RankTimeouts timeouts);
  ~WorkerLoop();  // waits for a placement build in progress

  // Serves the leader until it stops the group or the group fails; the process's exit status.
  int Run();

 private:
  // Carries out one message; the reply to send, or an error when this rank cannot go on.
  WorkerReply Handle(StepMessage& m);
  // Starts building a placement's share in the background (waits for a previous build first).
  void BeginBuild(PlacementUpdate update);
  // Switches to the built placement of `epoch` (waits for its build if it is still running).
  absl::Status SwitchTo(int64_t epoch);
  // Counts recorded since the previous reply go into `reply`.
  void TakeCounts(WorkerReply* reply);
  void Log(const std::string& event, const std::string& fields) const;

  Model* model_;
  Communicator* comm_;
  RankTimeouts timeouts_;
  std::unique_ptr<KvCache> cache_;
  std::vector<float> logits_;
  std::vector<int64_t> sent_tokens_, sent_rows_;  // counts already reported

  std::thread builder_;
  Mutex built_mu_;  // the builder thread writes the placement it builds
  int64_t building_epoch_ ABSL_GUARDED_BY(built_mu_) = -1;
  std::shared_ptr<const PlacedExperts> built_ ABSL_GUARDED_BY(built_mu_);
  int64_t built_epoch_ ABSL_GUARDED_BY(built_mu_) = -1;
  std::string build_error_ ABSL_GUARDED_BY(built_mu_);
};

}  // namespace ls::dist
