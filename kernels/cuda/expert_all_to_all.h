// Expert-parallel dispatch and combine between GPUs: an all-to-all exchange of variable-sized
// blocks of activation rows over NCCL (grouped ncclSend/ncclRecv), the transport of a multi-GPU
// MoE layer. Plain C++ header; implemented in expert_all_to_all.cu.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

typedef struct CUstream_st* cudaStream_t;
typedef struct ncclComm* ncclComm_t;

namespace ls::cuda {

// Rank r of D: sends send_rows[d] rows of `width` floats, laid out peer by peer in `send`, to each
// peer d, and receives recv_rows[d] rows from each peer into `recv`, peer by peer. Row counts are
// host arrays of D entries (exchanged beforehand). Returns an empty string or the NCCL error (on
// a non-blocking communicator, an empty string once the operations are being enqueued).
std::string AllToAllRows(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                         const std::vector<int64_t>& recv_rows, int64_t width, ncclComm_t comm, cudaStream_t stream);

}  // namespace ls::cuda
