// CudaBackend: the device, its stream and memory, weight preparation and synchronization. Each
// compute op of kernels/ops.def is defined beside its kernels, in that op's .cu file; the row
// exchange between ranks is RankExchange's.
#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <new>

#include "kernels/cuda/cuda_check.h"
#include "kernels/quantized_weight.h"
#include "kernels/cuda/fp8_blocks.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/host_uploader.h"
#include "kernels/cuda/moe_scratch.h"
#include "kernels/cuda/rank_exchange.h"

namespace ls {

namespace {

void SetError(std::string* error, std::string message) {
  if (error) *error = std::move(message);
}

}  // namespace

std::unique_ptr<CudaBackend> CreateCudaBackend(int device, std::string* error) {
  const int count = cuda::DeviceCount();
  if (count == 0) {
    SetError(error, "no CUDA device: the driver reports none, or there is no driver");
    return nullptr;
  }
  if (device < 0 || device >= count) {
    SetError(error,
             "CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(count) + " device(s))");
    return nullptr;
  }
  if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    SetError(error, "cudaSetDevice(" + std::to_string(device) + "): " + cudaGetErrorString(e));
    return nullptr;
  }
  cudaDeviceProp prop{};
  if (const cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess) {
    SetError(error, std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e));
    return nullptr;
  }
  if (prop.major < 9) {
    SetError(error, std::string("CUDA device ") + prop.name + " is sm_" + std::to_string(prop.major) +
                        std::to_string(prop.minor) + "; the kernels are built for sm_90 (Hopper) and later");
    return nullptr;
  }
  cudaStream_t stream = nullptr;
  if (const cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
    SetError(error, std::string("cudaStreamCreate: ") + cudaGetErrorString(e));
    return nullptr;
  }
  std::string gemm_error;
  auto gemm = cuda::CublasLtGemm::Create(&gemm_error);
  if (!gemm) {
    cudaStreamDestroy(stream);
    SetError(error, gemm_error);
    return nullptr;
  }
  const bool fp8 = gemm->SupportsFp8Blocks();
  std::unique_ptr<CudaBackend> backend(new CudaBackend(device, stream, std::move(gemm)));
  backend->fp8_gemms_supported_ = fp8;
  backend->fp8_gemms_ = fp8;
  return backend;
}

CudaBackend::CudaBackend(int device, cudaStream_t stream, std::unique_ptr<cuda::CublasLtGemm> gemm)
    : device_(device),
      stream_(stream),
      gemm_(std::move(gemm)),
      uploader_(std::make_unique<cuda::HostUploader>(stream)),
      moe_(std::make_unique<cuda::MoeScratch>()),
      exchange_(std::make_unique<cuda::RankExchange>(device)),
      tensor_exchange_(std::make_unique<cuda::RankExchange>(device)) {}

CudaBackend::~CudaBackend() {
  // No checks here: a destructor may run after a device fault.
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  gemm_.reset();
  uploader_.reset();
  moe_.reset();
  for (auto& [key, entry] : expert_tables_) cudaFree(entry.device);
  for (auto& [host, device] : rope_tables_) cudaFree(device);
  for (int32_t* b : counts_buffers_) cudaFreeHost(b);
  exchange_.reset();
  tensor_exchange_.reset();
  cudaStreamDestroy(stream_);
}

void CudaBackend::Activate() const { LS_CUDA_CHECK(cudaSetDevice(device_)); }

void CudaBackend::Synchronize() {
  Activate();
  LS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  AddPendingCounts();
}

void CudaBackend::AddPendingCounts() {
  for (size_t i = 0; i < pending_counts_.size(); ++i) {
    const PendingCounts& p = pending_counts_[i];
    for (int32_t e = 0; e < p.n; ++e) p.dst[e] += counts_buffers_[i][e];
  }
  pending_counts_.clear();
}

int32_t* CudaBackend::PendingCountsBuffer(size_t n) {
  // Bounded: after many MoE calls without a synchronization, wait once and start over.
  constexpr size_t kMaxPending = 256;
  if (n > counts_capacity_ || pending_counts_.size() >= kMaxPending) {
    LS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    AddPendingCounts();
  }
  if (n > counts_capacity_) {
    for (int32_t* b : counts_buffers_) LS_CUDA_CHECK(cudaFreeHost(b));
    counts_buffers_.clear();
    counts_capacity_ = n;
  }
  const size_t i = pending_counts_.size();
  if (i == counts_buffers_.size()) {
    void* b = nullptr;
    LS_CUDA_CHECK(cudaHostAlloc(&b, counts_capacity_ * sizeof(int32_t), cudaHostAllocDefault));
    counts_buffers_.push_back(static_cast<int32_t*>(b));
  }
  return counts_buffers_[i];
}

void* CudaBackend::Allocate(size_t bytes) {
  Activate();
  void* p = nullptr;
  if (cudaMalloc(&p, std::max<size_t>(bytes, 1)) != cudaSuccess) {
    cudaGetLastError();  // out of memory is not sticky; clear it
    throw std::bad_alloc();
  }
  return p;
}

bool CudaBackend::DeviceMemory(size_t* free_bytes, size_t* total_bytes) const {
  Activate();
  LS_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
  return true;
}

void CudaBackend::Free(void* p) {
  if (!p) return;
  Activate();
  LS_CUDA_CHECK(cudaStreamSynchronize(stream_));  // queued work may still use p
  AddPendingCounts();
  LS_CUDA_CHECK(cudaFree(p));
}

void CudaBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  Activate();
  LS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  LS_CUDA_CHECK(cudaStreamSynchronize(stream_));  // src may be reused as soon as this returns
  AddPendingCounts();
}

void CudaBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  Activate();
  LS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  LS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  AddPendingCounts();
}

bool CudaBackend::KeepsCodes(const Tensor& w, WeightUse use) const {
  return packed_experts_ && use == WeightUse::kMatmulExpert && cuda::GroupedGemmReads(w);
}

bool CudaBackend::KeepsFp8(const Tensor& w, WeightUse use) const {
  return fp8_gemms_ && use == WeightUse::kMatmul && cuda::Fp8GemmFormat(w);
}

size_t CudaBackend::PreparedWeightBytes(const Tensor& w, WeightUse use) const {
  if (KeepsCodes(w, use)) return Align64(w.bytes()) + Align64(w.scale_bytes()) + w.zero_bytes();
  if (KeepsFp8(w, use)) return Align64(w.bytes()) + cuda::Fp8WeightScaleBytes(w);
  return IsMatmul(use) ? static_cast<size_t>(w.numel()) * DTypeSize(DType::kBF16) : w.bytes();
}

Tensor CudaBackend::PrepareWeight(const Tensor& w, WeightUse use, void* dst) {
  LS_CUDA_REQUIRE(w.layout == Layout::kRowMajor, "PrepareWeight: host weights must be row-major");
  LS_CUDA_REQUIRE(IsMatmul(use) || !w.quantized(), "PrepareWeight: only matrix weights may be quantized");
  if (KeepsCodes(w, use)) {
    // A routed expert's codes and scales as they are: the grouped GEMMs widen them in their load
    // stage to the BF16 the dequantization below would give.
    auto* codes = static_cast<unsigned char*>(dst);
    unsigned char* scales = codes + Align64(w.bytes());
    unsigned char* zeros = scales + Align64(w.scale_bytes());
    Tensor t = w;
    CopyToDevice(codes, w.data, w.bytes());
    CopyToDevice(scales, w.quant.scale, w.scale_bytes());
    t.data = codes;
    t.quant.scale = scales;
    if (w.quant.zero) {
      CopyToDevice(zeros, w.quant.zero, w.zero_bytes());
      t.quant.zero = zeros;
    }
    return t;
  }
  if (KeepsFp8(w, use)) {
    // An FP8 block-scaled weight for the FP8 GEMMs: its codes, then its scales as cuBLASLt reads them.
    const std::vector<float> scales = cuda::Fp8WeightScales(w);
    auto* codes = static_cast<unsigned char*>(dst);
    auto* d_scales = codes + Align64(w.bytes());
    CopyToDevice(codes, w.data, w.bytes());
    CopyToDevice(d_scales, scales.data(), scales.size() * sizeof(float));
    Tensor t{codes, DType::kF8E4M3, w.rows, w.cols, Layout::kRowMajor};
    t.quant = QuantScales{d_scales, nullptr, DType::kF32, static_cast<int32_t>(cuda::kFp8Block),
                          static_cast<int32_t>(cuda::kFp8Block)};
    return t;
  }
  if (IsMatmul(use) && (w.dtype != DType::kBF16 || w.quantized())) {
    // Quantized weights (FP8 blocks, int8, int4, MXFP4) are dequantized here, row by row, to the
    // BF16 the GEMMs read: the values are the CPU kernels' float32 ones, rounded once. The dense
    // GEMMs (cuBLASLt) read BF16 only, so every quantized weight but the routed experts' (above)
    // is kept this way.
    std::vector<uint16_t> bf16(static_cast<size_t>(w.numel()));
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
      DequantizeRow(w, r, row.data());
      for (int64_t c = 0; c < w.cols; ++c) bf16[static_cast<size_t>(r * w.cols + c)] = F32ToBf16(row[c]);
    }
    CopyToDevice(dst, bf16.data(), bf16.size() * sizeof(uint16_t));
  } else {
    CopyToDevice(dst, w.data, w.bytes());
  }
  const DType dtype = IsMatmul(use) ? DType::kBF16 : w.dtype;
  return Tensor{dst, dtype, w.rows, w.cols, Layout::kRowMajor};
}

void CudaBackend::ExchangeRows(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                               const std::vector<int64_t>& recv_rows, int64_t width) {
  Activate();
  exchange_->Exchange(send, send_rows, recv, recv_rows, width, stream_);
}

bool CudaBackend::JoinRankGroup(RankTransport* group, std::string* error) {
  Activate();
  return exchange_->Join(group, error);
}

bool CudaBackend::JoinTensorGroup(RankTransport* group, std::string* error) {
  Activate();
  return tensor_exchange_->Join(group, error);
}

void CudaBackend::AllReduceSum(float* x, int64_t n) {
  Activate();
  tensor_exchange_->AllReduceSum(x, n, stream_);
}

void CudaBackend::AllGather(const float* send, int64_t n, float* recv) {
  Activate();
  tensor_exchange_->AllGather(send, n, recv, stream_);
}

}  // namespace ls
