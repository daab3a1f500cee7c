// The CUDA backend as one rank of a group of processes, run by mpirun with one GPU per rank
// (ctest: -np 2): JoinRankGroup bootstraps an NCCL communicator through MPI (rank 0's unique id
// broadcast), ExchangeRows moves blocks of rows between the GPUs, and the tiny model served by the
// group, each rank running its own sequences with its experts placed on its GPU, agrees with the
// CPU backend (with the GPU's rounding) on every sequence. As a tensor-parallel group the ranks sum
// and gather over NCCL (JoinTensorGroup), and the tiny model split over them — heads, widths,
// vocabulary — agrees with the CPU backend too. Reports SKIPPED without a device per rank.
#include "engine/rank_group.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "engine/expert_planner.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/bf16_activations_backend.h"
#include "tests/dist/mpi_test_main.h"
#include "tests/test_util.h"

namespace ls {
namespace {

dist::Communicator* g_comm = nullptr;

// As tests/cuda/model_logits_test.cc: the GPU's accumulation order and BF16 GLU outputs.
constexpr double kMaxRelativeError = 2e-2;

std::unique_ptr<Backend> RankGpu() {
  std::string error;
  auto b = CreateCudaBackend(g_comm->local_rank(), &error);
  EXPECT_TRUE(b) << error;
  return b;
}

bool EnoughDevices() { return cuda::DeviceCount() >= g_comm->size(); }

TEST(CudaRankGroup, ExchangeRowsMovesRowsBetweenGpus) {
  if (!EnoughDevices()) GTEST_SKIP() << "needs one CUDA device per rank (" << g_comm->size() << ")";
  auto gpu = RankGpu();
  ASSERT_TRUE(gpu);
  std::string error;
  ASSERT_TRUE(gpu->JoinRankGroup(g_comm, &error)) << error;
  const int R = g_comm->size(), me = g_comm->rank();
  const int64_t width = 48;
  // Rank me sends (me + 1) * 3 + p rows to rank p; row values name sender, receiver and row.
  std::vector<int64_t> send_rows(R), recv_rows(R);
  for (int p = 0; p < R; ++p) {
    send_rows[p] = (me + 1) * 3 + p;
    recv_rows[p] = (p + 1) * 3 + me;
  }
  std::vector<float> host;
  for (int p = 0; p < R; ++p)
    for (int64_t r = 0; r < send_rows[p]; ++r)
      for (int64_t c = 0; c < width; ++c) host.push_back(static_cast<float>(me * 10000 + p * 1000 + r * 10 + c % 10));
  int64_t received = 0;
  for (int64_t n : recv_rows) received += n;
  float* send = static_cast<float*>(gpu->Allocate(host.size() * sizeof(float)));
  float* recv = static_cast<float*>(gpu->Allocate(static_cast<size_t>(received * width) * sizeof(float)));
  gpu->CopyToDevice(send, host.data(), host.size() * sizeof(float));
  gpu->ExchangeRows(send, send_rows, recv, recv_rows, width);
  ASSERT_TRUE(g_comm->ok()) << g_comm->error();
  std::vector<float> got(static_cast<size_t>(received * width));
  gpu->CopyToHost(got.data(), recv, got.size() * sizeof(float));
  size_t at = 0;
  for (int p = 0; p < R; ++p)
    for (int64_t r = 0; r < recv_rows[p]; ++r)
      for (int64_t c = 0; c < width; ++c, ++at)
        ASSERT_EQ(got[at], static_cast<float>(p * 10000 + me * 1000 + r * 10 + c % 10)) << "from rank " << p;
  gpu->Free(send);
  gpu->Free(recv);
}

TEST(CudaRankGroup, TinyModelServedByTheGroupAgreesWithTheCpu) {
  if (!EnoughDevices()) GTEST_SKIP() << "needs one CUDA device per rank (" << g_comm->size() << ")";
  const std::string dir = testing::DataDir() + "/../../models/tiny";
  auto gpu = RankGpu();
  ASSERT_TRUE(gpu);
  testing::Bf16ActivationsBackend cpu(2);
  auto model = LoadModel(dir, gpu.get());
  auto reference = LoadModel(dir, &cpu);
  ASSERT_TRUE(model.ok() && reference.ok()) << model.status() << reference.status();
  ASSERT_TRUE((*model)->JoinRankGroup(g_comm).ok());
  const int32_t R = g_comm->size(), me = g_comm->rank(), N = static_cast<int32_t>((*model)->config().moe.num_experts);
  LayerPlacements layers;
  for (int32_t l = 0; l < (*model)->config().num_hidden_layers; ++l)
    if ((*model)->config().is_moe_layer(l)) layers.emplace_back(l, *UniformPlacement(N, R, N / R + 1));
  auto placed = (*model)->BuildPlacedExperts(layers);
  ASSERT_TRUE(placed.ok()) << placed.status();
  (*model)->SetPlacedExperts(*placed);
  // Six sequences, sequence i on rank i % R; a prefill, then decode steps.
  std::mt19937 rng(3);
  const int V = static_cast<int>((*model)->config().vocab_size);
  KvCache cache(gpu.get(), (*model)->kv_layout(), 64, 16, DType::kF32);
  KvCache ref_cache(&cpu, (*reference)->kv_layout(), 64, 16, DType::kF32);
  std::vector<std::vector<int32_t>> prompts(6);
  for (int i = 0; i < 6; ++i)
    for (int t = 0; t < 3 + 4 * i; ++t) prompts[i].push_back(static_cast<int32_t>(1 + rng() % (V - 1)));
  std::vector<int32_t> pos(6, 0);
  for (int step = 0; step < 5; ++step) {
    StepBatch all, mine;
    for (int i = 0; i < 6; ++i) {
      StepSequence s;
      s.start_pos = pos[i];
      std::vector<int32_t> tokens = step == 0 ? prompts[i] : std::vector<int32_t>{1 + (step * 7 + i) % (V - 1)};
      s.num_tokens = static_cast<int32_t>(tokens.size());
      for (int b = 0; b < 8; ++b) s.block_table.push_back(i * 8 + b);
      all.tokens.insert(all.tokens.end(), tokens.begin(), tokens.end());
      all.seqs.push_back(s);
      if (i % R == me) {
        mine.tokens.insert(mine.tokens.end(), tokens.begin(), tokens.end());
        mine.seqs.push_back(s);
      }
      pos[i] += s.num_tokens;
    }
    std::vector<float> want, got;
    ASSERT_TRUE((*reference)->Forward(all, ref_cache, &want).ok());
    ASSERT_TRUE((*model)->Forward(mine, cache, &got).ok());
    ASSERT_TRUE(g_comm->ok()) << g_comm->error();
    std::vector<float> want_mine;
    for (int i = 0; i < 6; ++i)
      if (i % R == me) want_mine.insert(want_mine.end(), want.begin() + i * V, want.begin() + (i + 1) * V);
    const testing::LogitsAgreement a = testing::CompareLogits(got, want_mine, V);
    std::printf("rank %d step %d: worst relative error %.5f, top agreement %.3f\n", me, step, a.worst_relative_error,
                a.top_agreement);
    EXPECT_LT(a.worst_relative_error, kMaxRelativeError) << "step " << step;
  }
}

TEST(CudaRankGroup, TensorGroupSumsAndGathersOverNccl) {
  if (!EnoughDevices()) GTEST_SKIP() << "needs one CUDA device per rank (" << g_comm->size() << ")";
  auto gpu = RankGpu();
  ASSERT_TRUE(gpu);
  std::unique_ptr<dist::Communicator> group = g_comm->Split(0);
  std::string error;
  ASSERT_TRUE(gpu->JoinTensorGroup(group.get(), &error)) << error;
  const int R = g_comm->size(), me = g_comm->rank();
  const int64_t n = 1000;
  std::vector<float> host(n);
  for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>((me + 1) * i);
  float* x = static_cast<float*>(gpu->Allocate(n * sizeof(float)));
  float* all = static_cast<float*>(gpu->Allocate(R * n * sizeof(float)));
  gpu->CopyToDevice(x, host.data(), n * sizeof(float));
  gpu->AllGather(x, n, all);
  gpu->AllReduceSum(x, n);
  ASSERT_TRUE(g_comm->ok()) << g_comm->error();
  std::vector<float> sum(n), gathered(R * n);
  gpu->CopyToHost(sum.data(), x, n * sizeof(float));
  gpu->CopyToHost(gathered.data(), all, gathered.size() * sizeof(float));
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sum[i], static_cast<float>(R * (R + 1) / 2 * i)) << i;
  for (int p = 0; p < R; ++p)
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(gathered[p * n + i], static_cast<float>((p + 1) * i)) << p;
  gpu->Free(x);
  gpu->Free(all);
}

TEST(CudaRankGroup, TinyModelSplitOverATensorGroupAgreesWithTheCpu) {
  if (!EnoughDevices()) GTEST_SKIP() << "needs one CUDA device per rank (" << g_comm->size() << ")";
  const std::string dir = testing::DataDir() + "/../../models/tiny";
  auto gpu = RankGpu();
  ASSERT_TRUE(gpu);
  std::unique_ptr<dist::Communicator> group = g_comm->Split(0);
  testing::Bf16ActivationsBackend cpu(2);
  LoadOptions options;
  options.tensor_parallel = {g_comm->rank(), g_comm->size()};
  auto model = LoadModel(dir, gpu.get(), options);
  auto reference = LoadModel(dir, &cpu);
  ASSERT_TRUE(model.ok() && reference.ok()) << model.status() << reference.status();
  ASSERT_TRUE((*model)->JoinRankGroup(g_comm).ok());
  ASSERT_TRUE((*model)->JoinTensorGroup(group.get()).ok());
  const int V = static_cast<int>((*model)->config().vocab_size);
  KvCache cache(gpu.get(), (*model)->kv_layout(), 64, 16, DType::kF32);
  KvCache ref_cache(&cpu, (*reference)->kv_layout(), 64, 16, DType::kF32);
  std::mt19937 rng(5);
  StepBatch batch;
  for (int i = 0; i < 4; ++i) {
    StepSequence s;
    s.num_tokens = 5 + 3 * i;
    for (int t = 0; t < s.num_tokens; ++t) batch.tokens.push_back(static_cast<int32_t>(1 + rng() % (V - 1)));
    for (int b = 0; b < 8; ++b) s.block_table.push_back(i * 8 + b);
    batch.seqs.push_back(s);
  }
  for (int step = 0; step < 4; ++step) {
    std::vector<float> want, got;
    ASSERT_TRUE((*reference)->Forward(batch, ref_cache, &want).ok());
    ASSERT_TRUE((*model)->Forward(batch, cache, &got).ok());
    ASSERT_TRUE(g_comm->ok()) << g_comm->error();
    const testing::LogitsAgreement a = testing::CompareLogits(got, want, V);
    std::printf("tensor-parallel rank %d step %d: worst relative error %.5f, top agreement %.3f\n", g_comm->rank(),
                step, a.worst_relative_error, a.top_agreement);
    EXPECT_LT(a.worst_relative_error, kMaxRelativeError) << "step " << step;
    for (StepSequence& s : batch.seqs) {  // one decode token each next
      s.start_pos += s.num_tokens;
      s.num_tokens = 1;
    }
    batch.tokens.assign(batch.seqs.size(), 1 + step % (V - 1));
  }
}

}  // namespace
}  // namespace ls

int main(int argc, char** argv) {
  return ls::dist::RunMpiTests(argc, argv, std::chrono::seconds(60), &ls::g_comm);
}
