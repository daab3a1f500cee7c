// Communicator: a rank group's MPI communicator — this process's rank, and every collective the
// group makes: the MoE exchange of RankTransport, the leader's messages to all ranks and their
// replies. Each collective is a non-blocking MPI call polled until it completes or the group's
// deadline passes; a missed deadline or an MPI error fails the group for good (every later call
// returns false at once without touching MPI), so a dead or stuck rank never hangs this one.
// Owns MPI's initialization; a failed group is never finalized (the process exits instead).
// Used by one thread at a time (MPI_THREAD_SERIALIZED).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "kernels/rank_transport.h"

namespace ls::dist {

class Communicator final : public RankTransport {
 public:
  // MPI_Init_thread over the world mpirun launched. Errors name what failed.
  static absl::StatusOr<std::unique_ptr<Communicator>> Init(int* argc, char*** argv);
  // Finalizes MPI (when this one brought it up) while the group is healthy; after a failure leaves
  // it alone (MPI_Finalize could wait for the dead rank).
  ~Communicator() override;
  // A second communicator over the same ranks, independent of this one (its failure leaves this
  // one healthy). Collective.
  std::unique_ptr<Communicator> Duplicate() const;
  // The ranks of this group with the same `color`, ordered by rank, as a group of their own (a
  // tensor-parallel group); collective over this group. Its failure fails this group too, and
  // this group's failure stops its calls. Null when MPI cannot split.
  std::unique_ptr<Communicator> Split(int32_t color);
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }
  // Whether every rank of this group runs on one host (collective).
  bool OnOneHost() const;
  // Rank among the processes on this host (picks the GPU) and the host's name.
  int32_t local_rank() const { return local_rank_; }
  const std::string& host() const { return host_; }

  bool ok() const override;
  std::string error() const override;
  void Fail(const std::string& reason) override;

  // How long any one collective may take before the group counts as failed (a split group keeps
  // the deadline of the group it was split from).
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return parent_ ? parent_->timeout() : timeout_; }

  bool AllToAll(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                const std::vector<int64_t>& recv_bytes) override;
  bool AllToAllCounts(const std::vector<int64_t>& send, std::vector<int64_t>* recv) override;
  bool Broadcast(void* data, size_t bytes, int32_t root) override;
  bool AllReduceSum(float* data, int64_t n) override;
  bool AllGather(const float* send, int64_t n, float* recv) override;
  bool WaitFor(const std::function<bool()>& done) override;

  // Rank 0's *bytes to every rank (its size first); the others' *bytes receive them.
  bool BroadcastBytes(std::string* bytes);
  // Rank 0's all[r] to rank r (sizes first; `all` is read on rank 0 only, [size()]); *mine gets
  // this rank's.
  bool ScatterBytes(const std::vector<std::string>& all, std::string* mine);
  // Every rank's `mine` to rank 0, which gets them in rank order in *all (the others: untouched).
  bool GatherBytes(const std::string& mine, std::vector<std::string>* all);

  // Seconds spent in AllToAll and AllToAllCounts (the MoE layers' dispatch and combine), and in
  // AllReduceSum and AllGather (tensor parallelism's), since the last call; resets the count.
  double TakeExchangeSeconds();

 private:
  Communicator() = default;
  // comm_ returns errors as codes; rank_ and size_ are read from it.
  void TakeComm();
  // Polls `request` until it completes (true) or the deadline passes or MPI reports an error
  // (false; the group fails naming `what`).
  bool Wait(MPI_Request* request, const char* what);
  // Starts a non-blocking collective (`start` returns MPI's code for `call`) and waits for it as
  // Wait does; the time since t0 counts as exchange time.
  bool Exchange(std::chrono::steady_clock::time_point t0, const char* call, const char* what,
                const std::function<int(MPI_Request*)>& start);

  int32_t rank_ = 0, size_ = 1, local_rank_ = 0;
  std::string host_;
  bool owns_mpi_ = false;
  Communicator* parent_ = nullptr;  // the group this one was split from (outlives it), or null
  MPI_Comm comm_ = MPI_COMM_NULL;  // a duplicate of MPI_COMM_WORLD that returns errors
  std::chrono::milliseconds timeout_{30000};
  double exchange_seconds_ = 0;
  mutable Mutex mu_;  // error_ is read by other threads, for metrics and logs
  std::string error_ ABSL_GUARDED_BY(mu_);  // empty while the group is healthy
};

}  // namespace ls::dist
