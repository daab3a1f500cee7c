// CublasLtGemm (see gemm_cublaslt.h). In cuBLASLt's column-major terms the row-major product
// y[M, N] = x[M, K] · w[N, K]ᵀ is yᵀ[N, M] = op(w)[N, K] · xᵀ[K, M] with op = transpose: w is a
// K × N column-major matrix (ld K), x a K × M one (ld K), y an N × M one (ld N).
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/gemm_cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <map>
#include <tuple>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_scratch.h"
#include "kernels/cuda/fp8_blocks.h"

#define LS_CUBLAS_CHECK(expr)                                                          \
  do {                                                                                 \
    const cublasStatus_t ls_status = (expr);                                           \
    if (ls_status != CUBLAS_STATUS_SUCCESS)                                            \
      ::ls::cuda::Fail(#expr, cublasLtGetStatusString(ls_status), __FILE__, __LINE__); \
  } while (0)

namespace ls::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's recommendation for Hopper
constexpr size_t kMaxPlans = 4096;                    // the cache is cleared when it grows past this

// Largest power of two (up to 256) dividing the address: the alignment cuBLASLt may assume.
uint32_t AlignmentOf(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  cublasLtMatmulAlgo_t algo{};

  void Destroy() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (w) cublasLtMatrixLayoutDestroy(w);
    if (x) cublasLtMatrixLayoutDestroy(x);
    if (y) cublasLtMatrixLayoutDestroy(y);
  }
};

enum class Kind : int { kBf16, kFp8Blocks };

// The kind, M, N, K and the alignments of w, x and y.
using PlanKey = std::tuple<Kind, int64_t, int64_t, int64_t, uint32_t, uint32_t, uint32_t>;

}  // namespace

struct CublasLtGemm::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  DeviceScratch x_bf16, x_fp8, x_fp8_scales;
  std::map<PlanKey, Plan> plans;
  int fp8_supported = -1;  // unknown until asked

  ~Impl() {
    for (auto& [key, plan] : plans) plan.Destroy();
    if (workspace) cudaFree(workspace);
    if (handle) cublasLtDestroy(handle);
  }

  const Plan& GetPlan(Kind kind, int64_t M, int64_t N, int64_t K, const void* w, const void* x, const void* y) {
    const PlanKey key{kind, M, N, K, AlignmentOf(w), AlignmentOf(x), AlignmentOf(y)};
    if (auto it = plans.find(key); it != plans.end()) return it->second;
    if (plans.size() >= kMaxPlans) {
      for (auto& [k, plan] : plans) plan.Destroy();
      plans.clear();
    }
    Plan plan;
    LS_CUDA_REQUIRE(MakePlan(key, &plan), kind == Kind::kBf16 ? "cuBLASLt has no algorithm for this BF16 GEMM shape"
                                                              : "cuBLASLt has no algorithm for this FP8 GEMM shape");
    return plans.emplace(key, plan).first->second;
  }

  // False (nothing kept) when the heuristic offers no algorithm.
  bool MakePlan(const PlanKey& key, Plan* out) {
    const auto [kind, M, N, K, align_w, align_x, align_y] = key;
    const cudaDataType_t in_type = kind == Kind::kBf16 ? CUDA_R_16BF : CUDA_R_8F_E4M3;
    Plan plan;
    LS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
    LS_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)));
    LS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none)));
    if (kind == Kind::kFp8Blocks) {
      // The weight (cuBLASLt's A) has a scale per 128 × 128 block, the activations (B) one per
      // 128 values of a row; the pointers are set per call.
      const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      LS_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode)));
      LS_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode)));
    }
    LS_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&plan.w, in_type, static_cast<uint64_t>(K), static_cast<uint64_t>(N), K));
    LS_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&plan.x, in_type, static_cast<uint64_t>(K), static_cast<uint64_t>(M), K));
    LS_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&plan.y, CUDA_R_32F, static_cast<uint64_t>(N), static_cast<uint64_t>(M), N));

    cublasLtMatmulPreference_t pref = nullptr;
    LS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t workspace_bytes = kWorkspaceBytes;
    LS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspace_bytes, sizeof(workspace_bytes)));
    LS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_w,
                                                         sizeof(align_w)));
    LS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_x,
                                                         sizeof(align_x)));
    LS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_y,
                                                         sizeof(align_y)));
    LS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_y,
                                                         sizeof(align_y)));
    constexpr int kCandidates = 16;
    cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.w, plan.x, plan.y, plan.y,
                                                                 pref, kCandidates, results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
      plan.Destroy();
      return false;
    }
    // Batch invariance: prefer the best algorithm that does not split K, so that every output
    // element is summed over k in one order whatever M is (split-K's count and partial-sum
    // reduction change with the shape).
    plan.algo = results[0].algo;
    for (int i = 0; i < found; ++i) {
      int32_t splits = 1;
      size_t written = 0;
      if (cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                               sizeof(splits), &written) == CUBLAS_STATUS_SUCCESS &&
          splits <= 1) {
        plan.algo = results[i].algo;
        break;
      }
    }
    *out = plan;
    return true;
  }
};

CublasLtGemm::CublasLtGemm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CublasLtGemm::~CublasLtGemm() = default;

std::unique_ptr<CublasLtGemm> CublasLtGemm::Create(std::string* error) {
  auto impl = std::make_unique<Impl>();
  if (const cublasStatus_t s = cublasLtCreate(&impl->handle); s != CUBLAS_STATUS_SUCCESS) {
    impl->handle = nullptr;
    *error = std::string("cublasLtCreate failed: ") + cublasLtGetStatusString(s);
    return nullptr;
  }
  if (const cudaError_t e = cudaMalloc(&impl->workspace, kWorkspaceBytes); e != cudaSuccess) {
    impl->workspace = nullptr;
    *error = std::string("cuBLASLt workspace allocation failed: ") + cudaGetErrorString(e);
    return nullptr;
  }
  return std::unique_ptr<CublasLtGemm>(new CublasLtGemm(std::move(impl)));
}

void CublasLtGemm::Run(const float* x, int64_t M, const Tensor& w, float* y, bool accumulate, cudaStream_t stream) {
  if (M == 0 || w.rows == 0) return;
  uint16_t* xb = impl_->x_bf16.As<uint16_t>(static_cast<size_t>(M * w.cols), stream);
  ConvertToBf16(x, M * w.cols, xb, stream);
  RunBf16(xb, M, w, y, accumulate, stream);
}

void CublasLtGemm::RunBf16(const uint16_t* x, int64_t M, const Tensor& w, float* y, bool accumulate,
                           cudaStream_t stream) {
  LS_CUDA_REQUIRE(w.dtype == DType::kBF16 && w.layout == Layout::kRowMajor,
                  "Gemm: weights must be prepared for WeightUse::kMatmul (BF16 row-major)");
  const int64_t N = w.rows, K = w.cols;
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate) LS_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<size_t>(M * N) * sizeof(float), stream));
    return;
  }
  const Plan& plan = impl_->GetPlan(Kind::kBf16, M, N, K, w.data, x, y);
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  LS_CUBLAS_CHECK(cublasLtMatmul(impl_->handle, plan.desc, &alpha, w.data, plan.w, x, plan.x, &beta, y, plan.y, y,
                                 plan.y, &plan.algo, impl_->workspace, kWorkspaceBytes, stream));
}

void CublasLtGemm::RunFp8(const float* x, int64_t M, const Tensor& w, float* y, bool accumulate,
                          cudaStream_t stream) {
  LS_CUDA_REQUIRE(Fp8GemmFormat(w), "Gemm: an FP8 weight must be e4m3 with 128 x 128 block scales");
  const int64_t N = w.rows, K = w.cols;
  if (M == 0 || N == 0) return;
  uint8_t* xq = impl_->x_fp8.As<uint8_t>(static_cast<size_t>(M * K), stream);
  float* xs = impl_->x_fp8_scales.As<float>(static_cast<size_t>((K + kFp8Block - 1) / kFp8Block * M), stream);
  RoundRowsToFp8(x, M, K, xq, xs, stream);
  const Plan& plan = impl_->GetPlan(Kind::kFp8Blocks, M, N, K, w.data, xq, y);
  const void* w_scales = w.quant.scale;
  const void* x_scales = xs;
  LS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales,
                                                 sizeof(w_scales)));
  LS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales,
                                                 sizeof(x_scales)));
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  LS_CUBLAS_CHECK(cublasLtMatmul(impl_->handle, plan.desc, &alpha, w.data, plan.w, xq, plan.x, &beta, y, plan.y, y,
                                 plan.y, &plan.algo, impl_->workspace, kWorkspaceBytes, stream));
}

bool CublasLtGemm::SupportsFp8Blocks() {
  if (impl_->fp8_supported < 0) {
    // cuBLASLt before 12.9 has no block scale modes; elsewhere the heuristic decides (Hopper has
    // them, other architectures may not).
    impl_->fp8_supported = 0;
    if (cublasLtGetVersion() >= 120900) {
      Plan probe;
      const PlanKey key{Kind::kFp8Blocks, 128, 128, 256, 256, 256, 256};
      if (impl_->MakePlan(key, &probe)) {
        probe.Destroy();
        impl_->fp8_supported = 1;
      }
    }
  }
  return impl_->fp8_supported == 1;
}

}  // namespace ls::cuda

// CudaBackend::Gemm: the op on the backend's stream.
namespace ls {

void CudaBackend::Gemm(const float* x, int64_t M, const Tensor& w, float* y, bool accumulate) {
  Activate();
  if (w.dtype == DType::kF8E4M3) {
    gemm_->RunFp8(x, M, w, y, accumulate, stream_);
  } else {
    gemm_->Run(x, M, w, y, accumulate, stream_);
  }
}

}  // namespace ls
