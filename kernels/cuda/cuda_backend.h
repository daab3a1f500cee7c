// CudaBackend: the Backend on one CUDA device and one stream, running the kernels/cuda ops.
// Activations, prepared weights and router outputs are device memory; the step's host metadata
// (token ids, positions, attention sequences and block tables) is uploaded through a ring of
// pinned staging buffers. Ops are queued on the stream without waiting, except CopyToDevice,
// CopyToHost, Free and Synchronize, which wait for it; MoeExperts' per-expert counts come back
// through pinned buffers and are added to the host counters at the next of those. Matmul weights are
// kept as BF16 row-major, except the routed experts' quantized ones (MXFP4, INT4, FP8 blocks), which
// stay codes and scales that the grouped GEMMs widen to the same BF16; the GEMMs use BF16
// operands with FP32 accumulation.
// Plain C++ (no CUDA headers). Used by one thread at a time.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_ops.h"


namespace ls {
namespace cuda {
class CublasLtGemm;
class HostUploader;
struct MoeScratch;
class RankExchange;
}  // namespace cuda

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  // Waits for every op queued so far.
  void Synchronize() override;

  bool DeviceMemory(size_t* free_bytes, size_t* total_bytes) const override;
  void* Allocate(size_t bytes) override;
  void Free(void* p) override;
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;

  // Matmul uses: BF16 row-major (F32 and F16 weights are converted on the host, quantized ones
  // dequantized there), except that kMatmulExpert keeps a quantized weight the grouped GEMMs read
  // (E2M1 + E8M0, U4 + F32/BF16/F16 with or without zero points, F8_E4M3 + F32/BF16/F16 blocks)
  // row-major as it is: codes, then scales, then zero points, each 64-byte aligned; and, with FP8
  // GEMMs on, kMatmul keeps an FP8 128 × 128 block-scaled weight (cuda/fp8_blocks.h) as its e4m3
  // codes and its block scales in cuBLASLt's layout (float32). kOther: as stored.
  size_t PreparedWeightBytes(const Tensor& w, WeightUse use) const override;
  Tensor PrepareWeight(const Tensor& w, WeightUse use, void* dst) override;
  // Off: quantized routed experts are dequantized to BF16 at PrepareWeight as the other matmul
  // weights (the same GEMM results, four times the memory for 4-bit codes). On by default; applies
  // to the weights prepared after the call.
  void set_packed_experts(bool on) { packed_experts_ = on; }
  // FP8 block-scaled dense GEMMs (cuda/fp8_blocks.h: activations rounded to e4m3 per 128 values,
  // DeepSeek-V3's recipe) for FP8 checkpoints' kMatmul weights. On by default where the device and
  // cuBLASLt run them (fp8_gemms_supported); off (--activation_dtype bfloat16): those weights are
  // dequantized to BF16 as the others. Applies to the weights prepared after the call.
  void set_fp8_gemms(bool on) { fp8_gemms_ = on && fp8_gemms_supported_; }
  bool fp8_gemms() const { return fp8_gemms_; }
  bool fp8_gemms_supported() const { return fp8_gemms_supported_; }

  // KV caches of float32 or BF16 elements (the attention kernels read either as float32).
  bool SupportsKvCacheDType(DType dtype) const override { return dtype == DType::kF32 || dtype == DType::kBF16; }

  // The compute ops of kernels/ops.def, queued on the stream, each defined in its kernels' .cu
  // file (CudaBackend::RmsNorm in rms_norm.cu, ...). MoeExperts with p.tokens_per_expert (host
  // memory): the per-expert counts are copied back without a wait and added at the next
  // synchronization.
#define LS_OP(name, params, args) void name params override;
#include "kernels/ops.def"
#undef LS_OP
  // Alone: an NCCL all-to-all of this GPU's rank with itself. In a rank group: an NCCL all-to-all
  // across the group's GPUs (the communicator bootstrapped through the group's transport by
  // JoinRankGroup), each one polled within the group's deadline; a peer that fails or never
  // answers aborts the communicator and fails the group rather than hang the stream.
  void ExchangeRows(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                    const std::vector<int64_t>& recv_rows, int64_t width) override;
  bool JoinRankGroup(RankTransport* group, std::string* error) override;
  // NCCL all-reduce and all-gather over the tensor-parallel group's GPUs, bootstrapped and
  // bounded as the expert exchange is.
  bool JoinTensorGroup(RankTransport* group, std::string* error) override;
  void AllReduceSum(float* x, int64_t n) override;
  void AllGather(const float* send, int64_t n, float* recv) override;

 private:
  friend std::unique_ptr<CudaBackend> CreateCudaBackend(int device, std::string* error);
  CudaBackend(int device, cudaStream_t stream, std::unique_ptr<cuda::CublasLtGemm> gemm);

  // Whether PrepareWeight keeps w (for `use`) in its quantized form.
  bool KeepsCodes(const Tensor& w, WeightUse use) const;
  // The device weight descriptions of one expert array (MoeParams gate/up/down), uploaded on
  // first use and again whenever the array describes other weights than last time.
  struct ExpertTableEntry {
    std::vector<cuda::ExpertWeight> host;  // [3N]: gate, up, down descriptions
    void* device = nullptr;                // the same [3N] in device memory
    cuda::ExpertTable table;
  };
  const cuda::ExpertTable& ExpertTableFor(const MoeParams& p);
  void Activate() const;  // makes this backend's device current for the calling thread
  // Adds the expert counts copied back since the last call to their host counters; the stream
  // must have been synchronized since those copies were queued.
  void AddPendingCounts();
  // A pinned buffer of counts_capacity_ counts for the next pending copy.
  int32_t* PendingCountsBuffer(size_t n);

  int device_;
  cudaStream_t stream_;
  std::unique_ptr<cuda::CublasLtGemm> gemm_;
  std::unique_ptr<cuda::HostUploader> uploader_;
  std::unique_ptr<cuda::MoeScratch> moe_;
  bool packed_experts_ = true;
  bool fp8_gemms_supported_ = false;
  bool fp8_gemms_ = false;
  bool KeepsFp8(const Tensor& w, WeightUse use) const;
  std::map<std::tuple<const Tensor*, const Tensor*, const Tensor*, int32_t>, ExpertTableEntry> expert_tables_;
  // The step's attention sequences flattened (attention_tokens_, attention_tables_) and uploaded;
  // the device pointers are valid until the uploader's next step.
  struct UploadedSeqs {
    const cuda::AttentionToken* tokens = nullptr;
    const int32_t* tables = nullptr;
    int32_t num_tokens = 0;
    int32_t max_context = 0;
  };
  UploadedSeqs UploadAttentionSeqs(const AttentionParams& p);
  UploadedSeqs UploadAttentionSeqs(const LatentAttentionParams& p);

  std::vector<cuda::AttentionToken> attention_tokens_;
  std::vector<cuda::RecurrentSeq> recurrent_seqs_;
  std::vector<cuda::RecurrentToken> recurrent_tokens_;
  std::vector<int32_t> attention_tables_;
  cuda::DeviceScratch attention_split_;     // partial softmaxes of split contexts
  cuda::DeviceScratch head_in_, head_out_;  // HeadGemm's gathered operands and per-head results
  // The RoPE frequency tables seen so far: host values and their device copy.
  std::vector<std::pair<std::vector<float>, float*>> rope_tables_;
  // Expert counts on their way back: pinned buffer i holds the copy for pending_counts_[i].
  struct PendingCounts {
    int64_t* dst;
    int32_t n;
  };
  std::vector<int32_t*> counts_buffers_;  // pinned, counts_capacity_ each
  size_t counts_capacity_ = 0;
  std::vector<PendingCounts> pending_counts_;
  std::unique_ptr<cuda::RankExchange> exchange_;         // ExchangeRows and JoinRankGroup
  std::unique_ptr<cuda::RankExchange> tensor_exchange_;  // AllReduceSum, AllGather and JoinTensorGroup
};

// A backend on CUDA device `device`, or nullptr with *error saying why (no driver or device, a
// device index out of range, a device older than sm_90, cuBLASLt unavailable).
std::unique_ptr<CudaBackend> CreateCudaBackend(int device, std::string* error);

}  // namespace ls
