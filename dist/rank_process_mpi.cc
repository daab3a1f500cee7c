// RankProcess over MPI: the communicator, the leader's group or the worker's loop.
#include "dist/communicator.h"
#include "dist/launch_env.h"
#include "dist/leader_group.h"
#include "dist/rank_process.h"
#include "dist/worker_loop.h"

namespace ls::dist {
namespace {

class MpiRankProcess final : public RankProcess {
 public:
  MpiRankProcess(std::unique_ptr<Communicator> comm, RankTimeouts timeouts)
      : comm_(std::move(comm)), timeouts_(timeouts) {
    comm_->set_timeout(timeouts_.start);
  }
  int32_t rank() const override { return comm_->rank(); }
  int32_t size() const override { return comm_->size(); }
  int32_t local_rank() const override { return comm_->local_rank(); }
  RankTransport* transport() override { return comm_.get(); }
  RankGroup* leader_group(Model* model) override {
    if (!leader_) leader_ = std::make_unique<LeaderGroup>(model, comm_.get(), timeouts_);
    return leader_.get();
  }
  std::string workers_json() const override { return leader_ ? leader_->workers_json() : "{}"; }
  int RunWorker(Model* model) override { return WorkerLoop(model, comm_.get(), timeouts_).Run(); }
  void Stop() override {
    if (leader_) leader_->Stop();
  }

 private:
  std::unique_ptr<Communicator> comm_;  // destroyed last: finalizes MPI when the group is healthy
  RankTimeouts timeouts_;
  std::unique_ptr<LeaderGroup> leader_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RankProcess>> RankProcess::JoinIfLaunched(const RankTimeouts& timeouts) {
  if (LaunchedGroupSize() <= 1) return std::unique_ptr<RankProcess>();
  auto comm = Communicator::Init(nullptr, nullptr);
  if (!comm.ok()) return comm.status();
  if ((*comm)->size() <= 1) return std::unique_ptr<RankProcess>();
  return std::unique_ptr<RankProcess>(new MpiRankProcess(std::move(*comm), timeouts));
}

}  // namespace ls::dist
