// CPU GEMM throughput for BF16 weights at decode and prefill shapes: GFLOP/s and weight-read
// GB/s per shape, single-threaded and on the whole pool, for the packed weights the model uses
// and, side by side in the same run, the row-major kernel; and, as MoE experts meet it, streamed: a
// GEMM over each of many copies of the weights in turn (256 MiB of them, out of every cache), so that
// every call reads its weights from memory. Prints JSON.
//   gemm_bench [N [K]]   (default 4096 x 1024)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "bench/positional_args.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/simd/kernel_table.h"

namespace {

double TimeGemm(ls::ThreadPool& pool, int M, const ls::Tensor& w, std::vector<float>& x,
                std::vector<float>& y) {
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    ls::cpu::Gemm(pool, x.data(), M, w, y.data(), false);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// One GEMM over each weight in turn (each read from memory: together they outgrow the caches).
double TimeStreamed(ls::ThreadPool& pool, int M, const std::vector<ls::Tensor>& ws, std::vector<float>& x,
                    std::vector<float>& y) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (const ls::Tensor& w : ws) ls::cpu::Gemm(pool, x.data(), M, w, y.data(), false);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best / static_cast<double>(ws.size());
}

}  // namespace

int main(int argc, char** argv) {
  ls::bench::PositionalArgs args(argc, argv, "gemm_bench [N [K]]");
  const int N = args.Int("N", 4096, 1, 1 << 20), K = args.Int("K", 1024, 1, 1 << 20);
  args.End();
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<uint16_t> wb(static_cast<size_t>(N) * K);
  for (auto& v : wb) v = ls::F32ToBf16(nd(rng) * 0.03f);
  ls::Tensor w{wb.data(), ls::DType::kBF16, N, K};
  // The packed weights where the model keeps them: the CPU backend's buffers (64-byte aligned; 2 MiB
  // pages for large ones), here one for the cached figures and one of copies for the streamed ones.
  ls::CpuBackend backend(1);
  const size_t packed_size = (ls::cpu::PackedWeightBytes(w) + 63) / 64 * 64;
  void* packed_bytes = backend.Allocate(packed_size);
  const ls::Tensor packed = ls::cpu::PackWeight(w, packed_bytes);
  const size_t copies = std::max<size_t>(4, (size_t{256} << 20) / packed_size);
  auto* streamed_bytes = static_cast<unsigned char*>(backend.Allocate(copies * packed_size));
  std::vector<ls::Tensor> streamed;
  for (size_t c = 0; c < copies; ++c) {
    std::memcpy(streamed_bytes + c * packed_size, packed_bytes, packed_size);
    ls::Tensor t = packed;
    t.data = streamed_bytes + c * packed_size;
    streamed.push_back(t);
  }
  ls::ThreadPool one(1), all(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  std::printf("{\n  \"benchmark\": \"gemm_bf16\",\n  \"N\": %d, \"K\": %d,\n  \"cpu_isa\": \"%s\",\n  \"shapes\": [\n", N, K,
              ls::cpu::ActiveIsaName().c_str());
  const int Ms[] = {1, 4, 16, 32, 64, 256};
  for (size_t i = 0; i < std::size(Ms); ++i) {
    const int M = Ms[i];
    std::vector<float> x(static_cast<size_t>(M) * K), y(static_cast<size_t>(M) * N);
    for (auto& v : x) v = nd(rng);
    const double t1 = TimeGemm(one, M, packed, x, y), tn = TimeGemm(all, M, packed, x, y);
    const double r1 = TimeGemm(one, M, w, x, y), rn = TimeGemm(all, M, w, x, y);
    const double sn = TimeStreamed(all, M, streamed, x, y);
    const double flops = 2.0 * M * N * K, bytes = 2.0 * N * K;
    std::printf(
        "    {\"M\": %d, \"gflops_1t\": %.1f, \"gflops_all\": %.1f, \"weight_gbps_1t\": %.1f, "
        "\"weight_gbps_all\": %.1f, \"row_major_gflops_1t\": %.1f, \"row_major_gflops_all\": %.1f, "
        "\"packed_over_row_major_all\": %.2f, \"streamed_gflops_all\": %.1f, \"streamed_weight_gbps_all\": %.1f, "
        "\"threads\": %d}%s\n",
        M, flops / t1 / 1e9, flops / tn / 1e9, bytes / t1 / 1e9, bytes / tn / 1e9, flops / r1 / 1e9, flops / rn / 1e9,
        rn / tn, flops / sn / 1e9, bytes / sn / 1e9, all.num_threads(), i + 1 < std::size(Ms) ? "," : "");
  }
  std::printf("  ]\n}\n");
  backend.Free(streamed_bytes);
  backend.Free(packed_bytes);
  return 0;
}
