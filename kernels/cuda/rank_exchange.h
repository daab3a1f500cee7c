// RankExchange: the CUDA backend's collectives between the ranks of a group — the row exchange
// of an expert-parallel group (Backend::ExchangeRows), the all-reduce and all-gather of a
// tensor-parallel one (Backend::AllReduceSum, AllGather) — and everything that can go wrong in them. A process alone
// runs an NCCL all-to-all of its GPU's rank with itself (the communicator made on first use). In a rank group of
// several processes, Join bootstraps a non-blocking NCCL communicator through the group's transport; each exchange is
// then polled within the group's deadline, and a peer that fails or never answers aborts the communicator and fails the
// group rather than hang the stream. Builds without NCCL copy rows alone and refuse a group. Owns its communicators and
// event; plain C++ header (no CUDA or NCCL headers). Used by one thread at a time, on its device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rank_transport.h"

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct ncclComm* ncclComm_t;

namespace ls::cuda {

class RankExchange {
 public:
  explicit RankExchange(int device) : device_(device) {}
  ~RankExchange();
  RankExchange(const RankExchange&) = delete;
  RankExchange& operator=(const RankExchange&) = delete;

  // Makes this GPU one rank of `group` (which outlives this); collective. A group of one is this
  // process alone (true, nothing to do). False with *error set when it cannot join.
  bool Join(RankTransport* group, std::string* error);
  // Backend::ExchangeRows on `stream` (device memory; row counts on the host).
  void Exchange(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                const std::vector<int64_t>& recv_rows, int64_t width, cudaStream_t stream);
  // Backend::AllReduceSum and AllGather on `stream` (device memory). Alone: nothing to sum, and the
  // gather copies.
  void AllReduceSum(float* x, int64_t n, cudaStream_t stream);
  void AllGather(const float* send, int64_t n, float* recv, cudaStream_t stream);

 private:
  // After a group collective was queued on `stream` (`error`: empty, or why it could not be):
  // waits for it within the group's deadline; on a failure aborts the communicator and fails the
  // group, naming `what`.
  void Await(const char* what, std::string error, cudaStream_t stream);

  int device_;
  ncclComm_t self_comm_ = nullptr;       // this GPU's rank alone, made on first use
  RankTransport* group_ = nullptr;       // the rank group joined, or null
  ncclComm_t group_comm_ = nullptr;      // one rank per process of the group (non-blocking)
  cudaEvent_t exchange_done_ = nullptr;  // recorded after each group all-to-all
};

}  // namespace ls::cuda
