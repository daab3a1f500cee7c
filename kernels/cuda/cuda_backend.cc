// CudaBackend: runs each Backend op's kernels/cuda implementation on the backend's stream,
// uploading the host metadata an op needs first (see cuda_backend.h); the row exchange between
// ranks is RankExchange's.
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

constexpr size_t kMaxExpertTables = 1024;

void SetError(std::string* error, std::string message) {
  if (error) *error = std::move(message);
}

// Whether the grouped GEMMs read this quantized weight as it is (kernels/cuda/grouped_gemm.h).
bool GroupedGemmFormat(const Tensor& w) {
  if (!w.quantized() || w.layout != Layout::kRowMajor || w.quant.block_rows < 1 || w.quant.block_cols < 1) return false;
  const DType s = w.quant.scale_dtype;
  const bool float_scales = s == DType::kF32 || s == DType::kBF16 || s == DType::kF16;
  switch (w.dtype) {
    case DType::kE2M1:
      return s == DType::kE8M0 && !w.quant.zero && w.cols % 2 == 0;
    case DType::kU4:
      return float_scales && w.cols % 2 == 0;
    case DType::kF8E4M3:
      return float_scales && !w.quant.zero;
    default:
      return false;
  }
}

// How the grouped GEMMs read a prepared expert weight (BF16 values, or codes and scales).
cuda::ExpertWeight DescribeExpertWeight(const Tensor& t) {
  cuda::ExpertWeight w;
  w.data = t.data;
  if (t.quantized()) {
    w.scale = t.quant.scale;
    w.zero = static_cast<const uint8_t*>(t.quant.zero);
    w.scale_dtype = t.quant.scale_dtype;
    w.block_rows = t.quant.block_rows;
    w.block_cols = t.quant.block_cols;
  }
  return w;
}

bool SameWeight(const cuda::ExpertWeight& a, const cuda::ExpertWeight& b) {
  return a.data == b.data && a.scale == b.scale && a.zero == b.zero && a.scale_dtype == b.scale_dtype &&
         a.block_rows == b.block_rows && a.block_cols == b.block_cols;
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
      exchange_(std::make_unique<cuda::RankExchange>(device)) {}

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
  return packed_experts_ && use == WeightUse::kMatmulExpert && GroupedGemmFormat(w);
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

void CudaBackend::Embedding(const int32_t* ids, int64_t num_tokens, const Tensor& table, float* out) {
  if (num_tokens == 0) return;
  Activate();
  const int32_t* d_ids = uploader_->Upload(ids, static_cast<size_t>(num_tokens));
  cuda::Embedding(d_ids, num_tokens, table, out, stream_);
}

void CudaBackend::RmsNorm(const float* x, int64_t rows, const Tensor& w, float eps, float* out) {
  Activate();
  cuda::RmsNorm(x, rows, w, eps, out, stream_);
}

void CudaBackend::Gemm(const float* x, int64_t M, const Tensor& w, float* y, bool accumulate) {
  Activate();
  if (w.dtype == DType::kF8E4M3) {
    gemm_->RunFp8(x, M, w, y, accumulate, stream_);
  } else {
    gemm_->Run(x, M, w, y, accumulate, stream_);
  }
}

void CudaBackend::Rope(float* x, int64_t num_tokens, const int32_t* positions, const RopeParams& p) {
  if (num_tokens == 0 || p.rotary_dim < 2) return;
  Activate();
  const size_t half = static_cast<size_t>(p.rotary_dim / 2);
  // A model has one or a few frequency tables: each is copied to the device once and kept.
  const float* d_inv_freq = nullptr;
  for (const auto& [host, device] : rope_tables_)
    if (host.size() == half && std::equal(host.begin(), host.end(), p.inv_freq)) d_inv_freq = device;
  if (!d_inv_freq) {
    void* device = nullptr;
    LS_CUDA_CHECK(cudaMalloc(&device, half * sizeof(float)));
    LS_CUDA_CHECK(cudaMemcpy(device, p.inv_freq, half * sizeof(float), cudaMemcpyHostToDevice));
    rope_tables_.emplace_back(std::vector<float>(p.inv_freq, p.inv_freq + half), static_cast<float*>(device));
    d_inv_freq = static_cast<float*>(device);
  }
  const int32_t* d_positions = uploader_->Upload(positions, static_cast<size_t>(num_tokens));
  cuda::Rope(x, num_tokens, d_positions, p, d_inv_freq, stream_);
}

void CudaBackend::AddBias(float* y, int64_t rows, const Tensor& bias) {
  Activate();
  cuda::AddBias(y, rows, bias, stream_);
}

void CudaBackend::MulSigmoid(float* x, int64_t rows, int64_t width, const float* gate, int64_t gate_width) {
  Activate();
  cuda::MulSigmoid(x, rows, width, gate, gate_width, stream_);
}

CudaBackend::UploadedSeqs CudaBackend::UploadAttentionSeqs(const AttentionParams& p) {
  UploadedSeqs u;
  u.max_context = cuda::FlattenAttentionSeqs(p, &attention_tokens_, &attention_tables_);
  u.num_tokens = static_cast<int32_t>(attention_tokens_.size());
  if (u.num_tokens == 0) return u;
  u.tokens = uploader_->Upload(attention_tokens_.data(), attention_tokens_.size());
  u.tables = uploader_->Upload(attention_tables_.data(), attention_tables_.size());
  return u;
}

CudaBackend::UploadedSeqs CudaBackend::UploadAttentionSeqs(const LatentAttentionParams& p) {
  AttentionParams seqs;
  seqs.seqs = p.seqs;
  seqs.num_seqs = p.num_seqs;
  return UploadAttentionSeqs(seqs);
}

void CudaBackend::PagedAttention(const AttentionParams& p) {
  Activate();
  const UploadedSeqs u = UploadAttentionSeqs(p);
  if (u.num_tokens == 0) return;
  cuda::PagedAttention(p, u.tokens, u.num_tokens, u.tables, u.max_context, &attention_split_, stream_);
}

void CudaBackend::PagedLatentAttention(const LatentAttentionParams& p) {
  Activate();
  const UploadedSeqs u = UploadAttentionSeqs(p);
  if (u.num_tokens == 0) return;
  cuda::PagedLatentAttention(p, u.tokens, u.num_tokens, u.tables, stream_);
}

void CudaBackend::StoreLatentRows(const LatentAttentionParams& p) {
  Activate();
  const UploadedSeqs u = UploadAttentionSeqs(p);
  if (u.num_tokens == 0) return;
  cuda::StoreLatentRows(p, u.tokens, u.num_tokens, u.tables, stream_);
}

void CudaBackend::LoadLatentRows(const KvLayer& cache, int32_t width, const AttentionSeq& seq, int32_t first,
                                 int32_t count, float* out) {
  if (count <= 0) return;
  Activate();
  const int32_t blocks = (first + count + cache.block_size - 1) / cache.block_size;
  LS_CUDA_REQUIRE(blocks <= seq.num_blocks, "LoadLatentRows: rows past the sequence's block table");
  const int32_t* d_table = uploader_->Upload(seq.block_table, static_cast<size_t>(blocks));
  cuda::LoadLatentRows(cache, width, d_table, first, count, out, stream_);
}

void CudaBackend::ExpandedLatentAttention(const ExpandedLatentAttentionParams& p) {
  Activate();
  cuda::ExpandedLatentAttention(p, stream_);
}

void CudaBackend::ShortConv(const ShortConvParams& p) {
  Activate();
  cuda::FlattenRecurrentSeqs(p.seqs, p.num_seqs, &recurrent_seqs_, &recurrent_tokens_);
  if (recurrent_tokens_.empty()) return;
  const auto* d_seqs = uploader_->Upload(recurrent_seqs_.data(), recurrent_seqs_.size());
  const auto* d_tokens = uploader_->Upload(recurrent_tokens_.data(), recurrent_tokens_.size());
  cuda::ShortConv(p, d_tokens, static_cast<int32_t>(recurrent_tokens_.size()), d_seqs, stream_);
}

void CudaBackend::KdaAttention(const KdaParams& p) {
  Activate();
  cuda::FlattenRecurrentSeqs(p.seqs, p.num_seqs, &recurrent_seqs_, &recurrent_tokens_);
  if (recurrent_seqs_.empty()) return;
  const auto* d_seqs = uploader_->Upload(recurrent_seqs_.data(), recurrent_seqs_.size());
  cuda::KdaAttention(p, d_seqs, stream_);
}

void CudaBackend::HeadGemm(const float* x, RowStrides xs, int64_t num_tokens, int32_t heads, const Tensor* w, float* y,
                           RowStrides ys) {
  if (num_tokens == 0 || heads == 0) return;
  Activate();
  // The heads' rows gathered head-major in BF16, one cuBLASLt GEMM per head, the results scattered.
  const int64_t K = w[0].cols, N = w[0].rows;
  uint16_t* in = head_in_.As<uint16_t>(static_cast<size_t>(heads * num_tokens * K), stream_);
  float* out = head_out_.As<float>(static_cast<size_t>(heads * num_tokens * N), stream_);
  cuda::GatherHeadRowsBf16(x, xs, num_tokens, heads, K, in, stream_);
  for (int32_t h = 0; h < heads; ++h)
    gemm_->RunBf16(in + h * num_tokens * K, num_tokens, w[h], out + h * num_tokens * N, false, stream_);
  cuda::ScatterHeadRows(out, num_tokens, heads, N, y, ys, stream_);
}

void CudaBackend::GluActivation(const float* gate, const float* up, int64_t rows, int64_t width, GluAct act,
                                float* out) {
  Activate();
  cuda::GluActivation(gate, up, rows, width, act, out, stream_);
}

void CudaBackend::Router(const RouterParams& p) {
  Activate();
  cuda::Router(p, stream_);
}

const cuda::ExpertTable& CudaBackend::ExpertTableFor(const MoeParams& p) {
  const int32_t N = p.num_experts;
  std::vector<cuda::ExpertWeight> host(static_cast<size_t>(3 * N));
  for (int32_t e = 0; e < N; ++e) {
    host[e] = DescribeExpertWeight(p.gate[e]);
    host[N + e] = DescribeExpertWeight(p.up[e]);
    host[2 * N + e] = DescribeExpertWeight(p.down[e]);
  }
  const auto key = std::make_tuple(p.gate, p.up, p.down, N);
  if (expert_tables_.size() >= kMaxExpertTables && !expert_tables_.count(key)) {
    // Arrays come and go (expert placements are rebuilt): drop the old tables at some point.
    LS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (auto& [k, old] : expert_tables_) LS_CUDA_CHECK(cudaFree(old.device));
    expert_tables_.clear();
  }
  ExpertTableEntry& entry = expert_tables_[key];
  if (entry.device && std::equal(entry.host.begin(), entry.host.end(), host.begin(), host.end(), SameWeight))
    return entry.table;

  // New or changed array: check every expert, then upload its descriptions.
  int64_t width = 0;
  for (int32_t e = 0; e < N && width == 0; ++e)
    if (p.gate[e].data) width = p.gate[e].rows;
  // The format of each matrix (BF16 or the codes), the same for every expert.
  DType codes[3] = {DType::kBF16, DType::kBF16, DType::kBF16};
  bool first = true, blocks128 = true;  // every matrix quantized in 128 x 128 blocks
  for (int32_t e = 0; e < N; ++e) {
    if (!p.gate[e].data) continue;  // an empty slot: never routed to
    const Tensor* mats[3] = {&p.gate[e], &p.up[e], &p.down[e]};
    for (int i = 0; i < 3; ++i) {
      const Tensor& t = *mats[i];
      LS_CUDA_REQUIRE(t.data && t.layout == Layout::kRowMajor &&
                          ((t.dtype == DType::kBF16 && !t.quantized()) || GroupedGemmFormat(t)),
                      "MoeExperts: expert weights must be prepared for WeightUse::kMatmulExpert");
      if (first) codes[i] = t.dtype;
      LS_CUDA_REQUIRE(t.dtype == codes[i], "MoeExperts: the experts of one array must share each matrix's format");
      blocks128 = blocks128 && !t.quant.zero && t.quant.block_rows == 128 && t.quant.block_cols == 128;
    }
    first = false;
    LS_CUDA_REQUIRE(p.gate[e].rows == width && p.gate[e].cols == p.in_width && p.up[e].rows == width &&
                        p.up[e].cols == p.in_width && p.down[e].rows == p.out_width && p.down[e].cols == width,
                    "MoeExperts: expert weight shapes disagree with each other or with in_width/out_width");
  }
  LS_CUDA_REQUIRE(codes[0] == codes[1], "MoeExperts: gate and up weights must share one format");
  const bool fp8_blocks = !first && blocks128 && codes[0] == DType::kF8E4M3 && codes[2] == DType::kF8E4M3 &&
                          width % 16 == 0 && p.in_width % 16 == 0 && p.out_width % 16 == 0;
  if (!entry.device) {
    LS_CUDA_CHECK(cudaMalloc(&entry.device, std::max<size_t>(host.size() * sizeof(cuda::ExpertWeight), 1)));
  }
  LS_CUDA_CHECK(cudaMemcpyAsync(entry.device, host.data(), host.size() * sizeof(cuda::ExpertWeight),
                                cudaMemcpyHostToDevice, stream_));
  LS_CUDA_CHECK(cudaStreamSynchronize(stream_));  // rare: at first use and when the array changes
  entry.host = std::move(host);
  const auto* table = static_cast<const cuda::ExpertWeight*>(entry.device);
  entry.table = cuda::ExpertTable{{table, codes[0]}, {table + N, codes[1]}, {table + 2 * N, codes[2]}, width};
  entry.table.fp8_blocks = fp8_blocks;
  return entry.table;
}

void CudaBackend::MoeExperts(const MoeParams& p) {
  if (p.num_tokens == 0) return;
  Activate();
  cuda::ExpertTable table = ExpertTableFor(p);
  table.fp8 = table.fp8_blocks && fp8_gemms_;
  cuda::MoePermute(p, *moe_, stream_);
  if (p.tokens_per_expert) {
    const size_t n = static_cast<size_t>(p.num_experts);
    int32_t* buffer = PendingCountsBuffer(n);
    LS_CUDA_CHECK(cudaMemcpyAsync(buffer, moe_->counts, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    pending_counts_.push_back({p.tokens_per_expert, p.num_experts});
  }
  cuda::MoeGroupedGemms(p, table, *moe_, stream_);
  cuda::MoeCombine(p, *moe_, stream_);
}

void CudaBackend::CombineExpertOutputs(const float* y, const float* weights, int64_t T, int32_t K, int64_t width,
                                       float* out) {
  Activate();
  cuda::CombineExpertOutputs(y, nullptr, weights, T, K, width, out, stream_);
}

void CudaBackend::Add(float* x, const float* y, int64_t n) {
  Activate();
  cuda::Add(x, y, n, stream_);
}

void CudaBackend::Copy(float* dst, const float* src, int64_t n) {
  if (n <= 0) return;
  Activate();
  LS_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::SetZero(float* x, int64_t n) {
  if (n <= 0) return;
  Activate();
  LS_CUDA_CHECK(cudaMemsetAsync(x, 0, static_cast<size_t>(n) * sizeof(float), stream_));
}

void CudaBackend::AttnResMix(const AttnResParams& p) {
  Activate();
  cuda::AttnResMix(p, stream_);
}

void CudaBackend::GatherRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) {
  if (n == 0) return;
  Activate();
  cuda::GatherRows(src, uploader_->Upload(rows, static_cast<size_t>(n)), n, width, dst, stream_);
}

void CudaBackend::ScatterRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) {
  if (n == 0) return;
  Activate();
  cuda::ScatterRows(src, uploader_->Upload(rows, static_cast<size_t>(n)), n, width, dst, stream_);
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

}  // namespace ls
