// CpuBackend: forwards each Backend op to its kernels/cpu implementation.
#include "kernels/cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "kernels/cpu/bf16_dot_gemm.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/packed_gemm.h"

namespace ls {

CpuBackend::CpuBackend(int num_threads, DType activation_dtype)
    : pool_(num_threads > 0 ? num_threads : std::max(1u, std::thread::hardware_concurrency())),
      activation_dtype_(activation_dtype) {}

void* CpuBackend::Allocate(size_t bytes) {
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
}  // namespace

size_t CpuBackend::PreparedWeightBytes(const Tensor& w, WeightUse use) const {
  if (!IsMatmul(use) || w.layout != Layout::kRowMajor) return 0;
  return TakesBf16Rows(w, activation_dtype_) ? cpu::Bf16DotPackedBytes(w) : cpu::PackedWeightBytes(w);
}
Tensor CpuBackend::PrepareWeight(const Tensor& w, WeightUse use, void* dst) {
  if (PreparedWeightBytes(w, use) == 0) return w;
  return TakesBf16Rows(w, activation_dtype_) ? cpu::PackBf16DotWeight(w, dst) : cpu::PackWeight(w, dst);
}

void CpuBackend::Embedding(const int32_t* ids, int64_t n, const Tensor& table, float* out) {
  cpu::Embedding(pool_, ids, n, table, out);
}
void CpuBackend::RmsNorm(const float* x, int64_t rows, const Tensor& w, float eps, float* out) {
  cpu::RmsNorm(pool_, x, rows, w, eps, out);
}
void CpuBackend::Gemm(const float* x, int64_t M, const Tensor& w, float* y, bool accumulate) {
  cpu::Gemm(pool_, x, M, w, y, accumulate);
}
void CpuBackend::GemmMany(const float* x, int64_t M, const GemmOutput* outs, int32_t n) {
  cpu::GemmMany(pool_, x, M, outs, n);
}
void CpuBackend::Rope(float* x, int64_t n, const int32_t* positions, const RopeParams& p) {
  cpu::Rope(pool_, x, n, positions, p);
}
void CpuBackend::AddBias(float* y, int64_t rows, const Tensor& bias) { cpu::AddBias(pool_, y, rows, bias); }
void CpuBackend::MulSigmoid(float* x, int64_t rows, int64_t width, const float* gate, int64_t gate_width) {
  cpu::MulSigmoid(pool_, x, rows, width, gate, gate_width);
}
void CpuBackend::PagedAttention(const AttentionParams& p) { cpu::PagedAttention(pool_, p); }
void CpuBackend::PagedLatentAttention(const LatentAttentionParams& p) { cpu::PagedLatentAttention(pool_, p); }
void CpuBackend::StoreLatentRows(const LatentAttentionParams& p) { cpu::StoreLatentRows(pool_, p); }
void CpuBackend::LoadLatentRows(const KvLayer& cache, int32_t width, const AttentionSeq& seq, int32_t first,
                                int32_t count, float* out) {
  cpu::LoadLatentRows(pool_, cache, width, seq, first, count, out);
}
void CpuBackend::ExpandedLatentAttention(const ExpandedLatentAttentionParams& p) {
  cpu::ExpandedLatentAttention(pool_, p);
}
void CpuBackend::ShortConv(const ShortConvParams& p) { cpu::ShortConv(pool_, p); }
void CpuBackend::KdaAttention(const KdaParams& p) { cpu::KdaAttention(pool_, p); }
void CpuBackend::HeadGemm(const float* x, RowStrides xs, int64_t num_tokens, int32_t heads, const Tensor* w, float* y,
                          RowStrides ys) {
  cpu::HeadGemm(pool_, x, xs, num_tokens, heads, w, y, ys);
}
void CpuBackend::GluActivation(const float* gate, const float* up, int64_t rows, int64_t width,
                               GluAct act, float* out) {
  cpu::GluActivation(pool_, gate, up, rows, width, act, out);
}
void CpuBackend::Router(const RouterParams& p) { cpu::Router(pool_, p); }
void CpuBackend::MoeExperts(const MoeParams& p) { cpu::MoeExperts(pool_, p); }
void CpuBackend::CombineExpertOutputs(const float* y, const float* weights, int64_t T, int32_t K, int64_t width,
                                      float* out) {
  cpu::CombineExpertOutputs(pool_, y, nullptr, weights, T, K, width, out);
}
void CpuBackend::Add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}
void CpuBackend::Copy(float* dst, const float* src, int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void CpuBackend::SetZero(float* x, int64_t n) {
  if (n > 0) std::memset(x, 0, static_cast<size_t>(n) * sizeof(float));
}
void CpuBackend::AttnResMix(const AttnResParams& p) { cpu::AttnResMix(pool_, p); }
void CpuBackend::GatherRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * width, src + rows[i] * width, width * sizeof(float));
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
void CpuBackend::ScatterRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + rows[i] * width, src + i * width, width * sizeof(float));
}

}  // namespace ls
