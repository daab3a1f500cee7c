// CpuBackend: memory, weight packing and the rank group; each compute op calls its kernels/cpu function.
#include "kernels/cpu/cpu_backend.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "kernels/cpu/bf16_dot_gemm.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/int8_dot_gemm.h"
#include "kernels/cpu/packed_gemm.h"

namespace ls {

CpuBackend::CpuBackend(int num_threads, DType activation_dtype)
    : pool_(num_threads > 0 ? num_threads : std::max(1u, std::thread::hardware_concurrency())),
      activation_dtype_(activation_dtype) {}

void* CpuBackend::Allocate(size_t bytes) {
  // Large buffers (the weights' arena, the KV cache) in 2 MiB pages where the kernel gives them:
  // streaming gigabytes of weights through 4 KiB pages costs a page walk every few microseconds.
  constexpr size_t kHuge = size_t{2} << 20;
  if (bytes >= 16 * kHuge) {
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, rounded);
    if (!p) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without it the pages stay small
#endif
    return p;
  }
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p) throw std::bad_alloc();
  return p;
}
void CpuBackend::Free(void* p) { std::free(p); }
void CpuBackend::CopyToDevice(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::CopyToHost(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

namespace {
bool TakesBf16Rows(const Tensor& w, DType activation_dtype) {
  return activation_dtype == DType::kBF16 && w.dtype == DType::kBF16 && !w.quantized();
}
// The weight as its GEMMs take it: under int8 activations, integer codes the int8-dot kernels read
// are marked for them (as the online w8a8 and w4a8 schemes mark theirs).
Tensor WithActivations(Tensor w, DType activation_dtype) {
  if (activation_dtype == DType::kI8 && cpu::Int8DotReadsCodes(w)) w.quant.int8_activations = true;
  return w;
}
}  // namespace

size_t CpuBackend::PreparedWeightBytes(const Tensor& w, WeightUse use) const {
  if (!IsMatmul(use) || w.layout != Layout::kRowMajor) return 0;
  return TakesBf16Rows(w, activation_dtype_) ? cpu::Bf16DotPackedBytes(w)
                                             : cpu::PackedWeightBytes(WithActivations(w, activation_dtype_));
}
Tensor CpuBackend::PrepareWeight(const Tensor& w, WeightUse use, void* dst) {
  if (PreparedWeightBytes(w, use) == 0) return w;
  return TakesBf16Rows(w, activation_dtype_) ? cpu::PackBf16DotWeight(w, dst)
                                             : cpu::PackWeight(WithActivations(w, activation_dtype_), dst, &pool_);
}

// Each op of kernels/ops.def calls its kernels/cpu function with the pool first.
#define LS_OP(name, params, args) \
  void CpuBackend::name params { cpu::name(pool_, LS_UNPARENTHESIZED args); }
#include "kernels/ops.def"
#undef LS_OP

void CpuBackend::GemmMany(const float* x, int64_t M, const GemmOutput* outs, int32_t n) {
  cpu::GemmMany(pool_, x, M, outs, n);
}
void CpuBackend::ExchangeRows(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                              const std::vector<int64_t>& recv_rows, int64_t width) {
  const int64_t row_bytes = width * static_cast<int64_t>(sizeof(float));
  if (group_ && group_->size() > 1) {
    std::vector<int64_t> send_bytes(send_rows.size()), recv_bytes(recv_rows.size());
    for (size_t p = 0; p < send_rows.size(); ++p) send_bytes[p] = send_rows[p] * row_bytes;
    for (size_t p = 0; p < recv_rows.size(); ++p) recv_bytes[p] = recv_rows[p] * row_bytes;
    group_->AllToAll(send, send_bytes, recv, recv_bytes);  // a failure sticks in the group
    return;
  }
  int64_t rows = 0;
  for (int64_t n : send_rows) rows += n;
  if (rows > 0 && send != recv) std::memcpy(recv, send, static_cast<size_t>(rows * row_bytes));
}
bool CpuBackend::JoinRankGroup(RankTransport* group, std::string*) {
  group_ = group;
  return true;
}
bool CpuBackend::JoinTensorGroup(RankTransport* group, std::string*) {
  tensor_group_ = group;
  return true;
}
void CpuBackend::AllReduceSum(float* x, int64_t n) {
  if (tensor_group_ && tensor_group_->size() > 1 && n > 0) tensor_group_->AllReduceSum(x, n);  // a failure sticks
}
void CpuBackend::AllGather(const float* send, int64_t n, float* recv) {
  if (tensor_group_ && tensor_group_->size() > 1) {
    tensor_group_->AllGather(send, n, recv);
  } else if (n > 0 && send != recv) {
    std::memcpy(recv, send, static_cast<size_t>(n) * sizeof(float));
  }
}

}  // namespace ls
