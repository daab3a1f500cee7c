// RankProcess over MPI: the communicator, the leader's group or the worker's loop.
#include "absl/strings/str_cat.h"
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
  absl::Status FormTensorGroups(int32_t size) override {
    if (size < 1 || comm_->size() % size != 0)
      return absl::InvalidArgumentError(
          absl::StrCat("--tensor_parallel_size ", size, " does not divide the group's ", comm_->size(), " ranks"));
    tensor_parallel_ = {comm_->rank() % size, size};
    if (size == 1) return absl::OkStatus();
    tensor_ = comm_->Split(comm_->rank() / size);
    if (!tensor_) return absl::UnavailableError("MPI could not split the group into tensor-parallel groups");
    if (!tensor_->OnOneHost())
      return absl::InvalidArgumentError(
          absl::StrCat("--tensor_parallel_size ", size, ": the ranks of a tensor-parallel group (", size,
                       " consecutive ranks) must share a host; give each host a multiple of ", size, " ranks"));
    return absl::OkStatus();
  }
  TensorParallel tensor_parallel() const override { return tensor_parallel_; }
  RankTransport* tensor_group() override { return tensor_.get(); }
  RankGroup* leader_group(Model* model) override {
    if (!leader_) leader_ = std::make_unique<LeaderGroup>(model, comm_.get(), timeouts_, tensor_parallel_.size);
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
  TensorParallel tensor_parallel_;
  std::unique_ptr<Communicator> tensor_;  // this rank's tensor-parallel group (split from comm_)
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
