// RankExchange: NCCL all-to-all between ranks with bounded waits (see rank_exchange.h).
#include "kernels/cuda/rank_exchange.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#if defined(LS_HAVE_NCCL)
#include <nccl.h>

#include "kernels/cuda/expert_all_to_all.h"
#endif

namespace ls::cuda {

namespace {
void SetError(std::string* error, std::string message) {
  if (error) *error = std::move(message);
}
}  // namespace

RankExchange::~RankExchange() {
  // No checks here: a destructor may run after a device fault.
#if defined(LS_HAVE_NCCL)
  if (self_comm_) ncclCommDestroy(self_comm_);
  if (group_comm_) ncclCommDestroy(group_comm_);
  if (exchange_done_) cudaEventDestroy(exchange_done_);
#endif
}

bool RankExchange::Join(RankTransport* group, std::string* error) {
  if (!group || group->size() <= 1) return true;
#if defined(LS_HAVE_NCCL)
  group_ = group;
  // Rank 0 makes the NCCL unique id and the group's transport (MPI) carries it to every rank.
  ncclUniqueId id{};
  if (group->rank() == 0) {
    if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      group->Fail(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
    }
  }
  if (!group->Broadcast(&id, sizeof(id), 0)) {
    SetError(error, "NCCL bootstrap: the unique id did not reach every rank: " + group->error());
    return false;
  }
  // A non-blocking communicator: its set-up and every exchange are polled within the group's
  // deadline, so a peer that never arrives cannot hang this rank.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&group_comm_, group->size(), id, group->rank(), &config);
  if (r == ncclSuccess || r == ncclInProgress) {
    group->WaitFor([&] {
      ncclCommGetAsyncError(group_comm_, &r);
      return r != ncclInProgress;
    });
  }
  if (r != ncclSuccess) {
    const std::string why =
        r == ncclInProgress ? "it did not finish within the rank group's deadline" : std::string(ncclGetErrorString(r));
    if (group_comm_) ncclCommAbort(group_comm_);
    group_comm_ = nullptr;
    SetError(error, "NCCL communicator of " + std::to_string(group->size()) + " ranks on CUDA device " +
                        std::to_string(device_) + ": " + why);
    return false;
  }
  LS_CUDA_CHECK(cudaEventCreateWithFlags(&exchange_done_, cudaEventDisableTiming));
  return true;
#else
  SetError(error, "this build's CUDA backend has no NCCL, which a rank group's expert all-to-all needs");
  return false;
#endif
}

void RankExchange::Exchange(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                            const std::vector<int64_t>& recv_rows, int64_t width, cudaStream_t stream) {
#if defined(LS_HAVE_NCCL)
  if (group_comm_) {            // one rank of a group of processes: NCCL across them, never waiting unbounded
    if (!group_->ok()) return;  // the group has failed already: nothing moves any more
    Await("expert all-to-all", AllToAllRows(send, send_rows, recv, recv_rows, width, group_comm_, stream), stream);
    return;
  }
#endif
  int64_t rows = 0;
  for (int64_t n : send_rows) rows += n;
  if (rows == 0) return;
#if defined(LS_HAVE_NCCL)
  if (send_rows.size() == 1) {  // this process alone: an all-to-all of its GPU's rank with itself
    if (!self_comm_) {
      const ncclResult_t r = ncclCommInitAll(&self_comm_, 1, &device_);
      LS_CUDA_REQUIRE(r == ncclSuccess, ncclGetErrorString(r));
    }
    const std::string error = AllToAllRows(send, send_rows, recv, recv_rows, width, self_comm_, stream);
    LS_CUDA_REQUIRE(error.empty(), error.c_str());
    return;
  }
#endif
  if (send != recv)
    LS_CUDA_CHECK(cudaMemcpyAsync(recv, send, static_cast<size_t>(rows * width) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, stream));
}

void RankExchange::Await(const char* what, std::string error, cudaStream_t stream) {
#if defined(LS_HAVE_NCCL)
  if (error.empty()) {
    LS_CUDA_CHECK(cudaEventRecord(exchange_done_, stream));
    ncclResult_t async = ncclSuccess;
    const bool finished = group_->WaitFor([&] {
      ncclCommGetAsyncError(group_comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) return true;
      return cudaEventQuery(exchange_done_) == cudaSuccess;
    });
    if (!finished) error = std::string("the NCCL ") + what + " did not finish within the rank group's deadline";
    if (async != ncclSuccess && async != ncclInProgress) error = std::string("NCCL: ") + ncclGetErrorString(async);
  }
  if (!error.empty()) {
    // A dead or stuck peer: abort the communicator so that the stream's kernels end, and let
    // the group report the failure (the step's caller stops the server).
    ncclCommAbort(group_comm_);
    group_comm_ = nullptr;
    group_->Fail(std::string(what) + " on CUDA device " + std::to_string(device_) + ": " + error);
  }
#else
  (void)what, (void)error, (void)stream;
#endif
}

void RankExchange::AllReduceSum(float* x, int64_t n, cudaStream_t stream) {
#if defined(LS_HAVE_NCCL)
  if (group_comm_ && n > 0) {
    if (!group_->ok()) return;
    const ncclResult_t r = ncclAllReduce(x, x, static_cast<size_t>(n), ncclFloat32, ncclSum, group_comm_, stream);
    Await("tensor-parallel all-reduce", r == ncclSuccess || r == ncclInProgress ? "" : ncclGetErrorString(r), stream);
  }
#else
  (void)x, (void)n, (void)stream;
#endif
}

void RankExchange::AllGather(const float* send, int64_t n, float* recv, cudaStream_t stream) {
#if defined(LS_HAVE_NCCL)
  if (group_comm_) {
    if (!group_->ok() || n == 0) return;
    const ncclResult_t r = ncclAllGather(send, recv, static_cast<size_t>(n), ncclFloat32, group_comm_, stream);
    Await("tensor-parallel all-gather", r == ncclSuccess || r == ncclInProgress ? "" : ncclGetErrorString(r), stream);
    return;
  }
#endif
  if (n > 0 && send != recv)
    LS_CUDA_CHECK(
        cudaMemcpyAsync(recv, send, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace ls::cuda
