// RankTransport: the host side of a group of processes (ranks) that serve one model together —
// which rank this process is, and the collectives over host memory that expert-parallel dispatch
// (row counts, slot ids) and a backend's own transport set-up (NCCL's unique id) need. dist/
// implements it over MPI; kernels and models see only this interface.
// Every call is collective: all ranks make the same calls in the same order. A call that cannot
// finish within the group's deadline (a rank died or hangs) fails, and the failure sticks: later
// calls return false at once, so a step in progress runs to its end without waiting and whoever
// drives the step reports the failure. Used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ls {

class RankTransport {
 public:
  virtual ~RankTransport() = default;
  virtual int32_t rank() const = 0;
  virtual int32_t size() const = 0;
  // False once any call failed; error() says what happened.
  virtual bool ok() const = 0;
  virtual std::string error() const = 0;
  // Marks the group failed (a device transport's own error, say); the first reason is kept.
  virtual void Fail(const std::string& reason) = 0;

  // All-to-all of variable-sized byte blocks: send_bytes[p] bytes go to rank p (blocks laid out
  // rank by rank in `send`) and recv_bytes[p] bytes arrive from rank p (rank by rank in `recv`).
  // Each count is [size()]; recv_bytes must match what the peers send.
  virtual bool AllToAll(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                        const std::vector<int64_t>& recv_bytes) = 0;
  // One value per peer: (*recv)[p] is the value rank p sent to this rank (its send[rank()]).
  virtual bool AllToAllCounts(const std::vector<int64_t>& send, std::vector<int64_t>* recv) = 0;
  // `bytes` bytes from rank `root` to every rank.
  virtual bool Broadcast(void* data, size_t bytes, int32_t root) = 0;
  // Tensor parallelism's collectives: data[0, n) summed over the ranks, in place, the same sum on
  // every rank (a rank's share of a split matrix product, made whole); and every rank's `n` floats
  // of `send` to every rank, rank by rank in recv ([size()][n]).
  virtual bool AllReduceSum(float* data, int64_t n) = 0;
  virtual bool AllGather(const float* send, int64_t n, float* recv) = 0;
  // Polls `done` until it returns true, within the group's deadline; false (and the failure
  // sticks) when the deadline passes first. For waits outside the transport, such as a device's
  // collective, which must not hang on a dead peer either.
  virtual bool WaitFor(const std::function<bool()>& done) = 0;
};

}  // namespace ls
