// NCCL all-to-all of row blocks for expert-parallel dispatch (rows to the devices hosting their
// experts) and combine (results back).
#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/cuda/expert_all_to_all.h"

namespace ls::cuda {

std::string AllToAllRows(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                         const std::vector<int64_t>& recv_rows, int64_t width, ncclComm_t comm, cudaStream_t stream) {
  const int peers = static_cast<int>(send_rows.size());
  ncclResult_t r = ncclGroupStart();
  int64_t send_off = 0, recv_off = 0;
  for (int p = 0; p < peers && r == ncclSuccess; ++p) {
    if (send_rows[p] > 0) r = ncclSend(send + send_off * width, send_rows[p] * width, ncclFloat, p, comm, stream);
    if (r == ncclSuccess && recv_rows[p] > 0)
      r = ncclRecv(recv + recv_off * width, recv_rows[p] * width, ncclFloat, p, comm, stream);
    send_off += send_rows[p];
    recv_off += recv_rows[p];
  }
  const ncclResult_t end = ncclGroupEnd();
  if (r == ncclSuccess) r = end;
  // A non-blocking communicator may still be enqueuing: the caller polls it.
  return r == ncclSuccess || r == ncclInProgress ? std::string() : std::string(ncclGetErrorString(r));
}

}  // namespace ls::cuda
