// Tensor parallelism over a rank group, run by mpirun on every rank (ctest: -np 2 and -np 4): the
// ranks form tensor-parallel groups of T consecutive ranks (T = 2, and T = every rank), each
// group running one batch with its parts of the attention heads, dense and shared-expert widths
// and vocabulary, while the routed experts are placed over all ranks (hot experts replicated).
// Every logit equals the same sequences run in one process without either, within float
// rounding: the parts' sums are added in another order. Steps cover prefill, prompts in chunks,
// cached decode, a group with nothing to run, and a preempted sequence computed again from its
// first token into other blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "bench/random_model.h"
#include "dist/communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/dist/mpi_test_main.h"
#include "tests/dist/skewed_placements.h"
#include "tests/test_util.h"

namespace ls::dist {
namespace {

Communicator* g_comm = nullptr;

// Logits are compared relative to the row's largest magnitude: float32 sums of T parts in another
// order differ by a few units in the last place of the largest terms.
constexpr float kTolerance = 2e-5f;

struct Seq {
  std::vector<int32_t> tokens;  // the prompt, then every token fed since
  int32_t group = 0;            // the tensor-parallel group that runs it
  int32_t fed = 0;              // tokens in its cache
  int32_t block0 = 0;           // its blocks: [block0, block0 + 16)
};

// Runs the fixture with tensor-parallel groups of `T` ranks; true when every rank ran it.
void RunFixture(const std::string& dir, int32_t T) {
  Communicator& comm = *g_comm;
  const int32_t R = comm.size(), me = comm.rank();
  ASSERT_EQ(R % T, 0);
  const int32_t groups = R / T, my_group = me / T;
  std::unique_ptr<Communicator> tensor = comm.Split(my_group);
  ASSERT_NE(tensor, nullptr);
  ASSERT_EQ(tensor->size(), T);
  CpuBackend backend(1), reference_backend(1);
  LoadOptions options;
  options.routed_experts_on_host = true;  // as the server's ranks load: experts come with a placement
  options.tensor_parallel = {tensor->rank(), T};
  auto model = LoadModel(dir, &backend, options);
  auto reference = LoadModel(dir, &reference_backend);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_TRUE((*model)->JoinRankGroup(&comm).ok());
  ASSERT_TRUE((*model)->JoinTensorGroup(tensor.get()).ok());
  const ModelConfig& c = (*model)->config();
  const int64_t V = c.vocab_size;

  // Loading bound only this rank's parts: at least the embedding's and the q and o projections'
  // other parts are not in it.
  const int64_t whole = (*reference)->checkpoint_bytes_bound(), mine = (*model)->checkpoint_bytes_bound();
  const int64_t value = DTypeBytes((*reference)->dtype(), 1), d = c.hidden_size;
  const int64_t q_width = static_cast<int64_t>(c.attention.num_heads) * c.attention.head_dim;
  const int64_t split_at_least = (V * d + c.num_hidden_layers * 2 * q_width * d) * value;
  EXPECT_LE(mine, whole - split_at_least * (T - 1) / T) << dir;

  if (c.has_moe_layers()) {
    const int32_t N = static_cast<int32_t>(c.moe.num_experts);
    auto placed = (*model)->BuildPlacedExperts(testing::SkewedPlacements(c, R, (N + R - 1) / R + 2, 5));
    ASSERT_TRUE(placed.ok()) << placed.status();
    (*model)->SetPlacedExperts(*placed);
  }

  // Six sequences over the groups (sequence i in group i % groups); one block table of 16 blocks
  // of 4 each, the same ids in the group's caches and the reference's.
  std::mt19937 rng(7);
  std::vector<Seq> seqs(6);
  for (int i = 0; i < 6; ++i) {
    for (int t = 0; t < 3 + 4 * i; ++t) seqs[i].tokens.push_back(static_cast<int32_t>(1 + rng() % (V - 1)));
    seqs[i].group = i % groups;
    seqs[i].block0 = 16 * i;
  }
  constexpr int32_t kBlocks = 16 * 8, kBlockSize = 4;
  KvCache cache(&backend, (*model)->kv_layout(), kBlocks, kBlockSize, DType::kF32, 8);
  KvCache ref_cache(&reference_backend, (*reference)->kv_layout(), kBlocks, kBlockSize, DType::kF32, 8);

  for (int step = 0; step < 8; ++step) {
    if (step == 5) {  // sequence 1 is preempted: computed again from its first token into other blocks
      seqs[1].fed = 0;
      seqs[1].block0 = 16 * 6;
    }
    StepBatch all, mine_batch;
    std::vector<int> in_step;
    for (int i = 0; i < 6; ++i) {
      Seq& s = seqs[i];
      if (step == 3 && s.group == groups - 1 && groups > 1) continue;  // that group runs an empty batch
      // A prompt goes in chunks of at most 7 tokens; afterwards one new token a step.
      if (s.fed == static_cast<int32_t>(s.tokens.size()))
        s.tokens.push_back(static_cast<int32_t>(1 + (step * 31 + i * 13) % (V - 1)));
      const int32_t n = std::min<int32_t>(7, static_cast<int32_t>(s.tokens.size()) - s.fed);
      StepSequence ss;
      ss.start_pos = s.fed;
      ss.num_tokens = n;
      ss.all_logits = step == 0;
      ss.state_slot = i;
      for (int b = 0; b < 16; ++b) ss.block_table.push_back(s.block0 + b);
      all.tokens.insert(all.tokens.end(), s.tokens.begin() + s.fed, s.tokens.begin() + s.fed + n);
      all.seqs.push_back(ss);
      if (s.group == my_group) {
        mine_batch.tokens.insert(mine_batch.tokens.end(), s.tokens.begin() + s.fed, s.tokens.begin() + s.fed + n);
        mine_batch.seqs.push_back(ss);
      }
      in_step.push_back(i);
    }
    std::vector<float> want, got;
    ASSERT_TRUE((*reference)->Forward(all, ref_cache, &want).ok());
    ASSERT_TRUE((*model)->Forward(mine_batch, cache, &got).ok());
    ASSERT_TRUE(comm.ok()) << comm.error();
    int64_t want_row = 0, got_row = 0;
    for (size_t k = 0; k < in_step.size(); ++k) {
      Seq& s = seqs[in_step[k]];
      const int64_t rows = all.seqs[k].all_logits ? all.seqs[k].num_tokens : 1;
      if (s.group == my_group) {
        for (int64_t r = 0; r < rows; ++r) {
          const float* w = want.data() + (want_row + r) * V;
          float scale = 1;
          for (int64_t v = 0; v < V; ++v) scale = std::max(scale, std::fabs(w[v]));
          EXPECT_LE(testing::MaxAbsDiff(got.data() + (got_row + r) * V, w, V), kTolerance * scale)
              << dir << " T=" << T << " step " << step << " sequence " << in_step[k] << " row " << r << " on rank "
              << me;
        }
        got_row += rows;
      }
      want_row += rows;
      s.fed += all.seqs[k].num_tokens;
    }
    EXPECT_EQ(got_row * V, static_cast<int64_t>(got.size()));
  }
}

// T = 2 (with 4 ranks: two groups side by side), then T = every rank where the model's heads
// split that far (the KDA fixtures have two heads).
void RunBoth(const std::string& dir, int32_t max_tp = 4) {
  RunFixture(dir, 2);
  if (g_comm->size() > 2 && g_comm->size() <= max_tp) RunFixture(dir, g_comm->size());
}

TEST(TensorParallel, Qwen3MoeLogitsEqualOneProcess) { RunBoth(testing::HfFixtureDir("qwen3_moe_f32")); }

TEST(TensorParallel, Glm4MoeWithDenseLayerAndSharedExpertEqualsOneProcess) {
  RunBoth(testing::HfFixtureDir("glm4_moe_f32"));
}

TEST(TensorParallel, Qwen2MoeGatedSharedExpertAndBiasesEqualOneProcess) {
  RunBoth(testing::HfFixtureDir("qwen2_moe_f32"));
}

TEST(TensorParallel, SlidingWindowAndTiedEmbeddingEqualOneProcess) {
  RunBoth(testing::HfFixtureDir("qwen3_moe_sliding_f32"));
  RunBoth(testing::HfFixtureDir("mixtral_tied_f32"));
}

TEST(TensorParallel, LatentMoeWithOneKvHeadEqualsOneProcess) {
  // One key/value head: every rank of the group keeps the same one.
  RunBoth(testing::FixtureDir("plain_sigmoid_silu_shared_hd24_bf16_sharded"));
  RunBoth(testing::FixtureDir("latent_sigmoid_situ_bf16"));
}

TEST(TensorParallel, MlaHeadsSplitWithTheLatentCacheWholeEqualOneProcess) {
  RunBoth(testing::HfFixtureDir("deepseek_v3_f32"));          // q through its LoRA, both MLA forms
  RunBoth(testing::HfFixtureDir("deepseek_v3_noqlora_f32"));  // q straight from the hidden state
}

TEST(TensorParallel, KimiLinearKdaHeadsAndTheirStateSplitEqualOneProcess) {
  RunBoth(testing::HfFixtureDir("kimi_linear_f32"), /*max_tp=*/2);
}

TEST(TensorParallel, FourKdaAndMlaHeadsSplitFourWaysEqualOneProcess) {
  // A random Kimi-Linear checkpoint (KDA and MLA layers alternating, four heads each), so that
  // T = 4 splits the recurrent state too; each rank writes the same one (same seed) for itself.
  bench::RandomModelSpec spec;
  spec.vocab = 512, spec.d = 64, spec.layers = 2, spec.heads = 4, spec.kv_heads = 4, spec.head_dim = 16;
  spec.experts = 8, spec.top_k = 2, spec.f = 32, spec.d_lat = 0, spec.expert_output_norm = false;
  spec.kda = true, spec.full_attn_every = 2, spec.mla_latent = 32, spec.mla_rope = 8, spec.mla_nope = 16;
  spec.mla_v = 16;
  const std::string dir = ::testing::TempDir() + "/tp_kda4_rank" + std::to_string(g_comm->rank());
  ASSERT_TRUE(bench::WriteRandomModel(spec, dir, 17).ok());
  RunBoth(dir);
  std::filesystem::remove_all(dir);
}

TEST(TensorParallel, KimiK3TinyEqualsOneProcess) {
  // Attention residuals, gated MLA, bounded KDA, LatentMoE; experts in BF16 and in MXFP4.
  RunBoth(testing::K3FixtureDir("k3_tiny_bf16"), /*max_tp=*/2);
  RunBoth(testing::K3FixtureDir("k3_tiny_mxfp4"), /*max_tp=*/2);
  RunBoth(testing::K3FixtureDir("k3_tiny_kda4_bf16"));  // four KDA heads: T = 4 as well
}

TEST(TensorParallel, CollectivesSumAndGatherOverTheGroup) {
  Communicator& comm = *g_comm;
  std::unique_ptr<Communicator> pair = comm.Split(comm.rank() / 2);
  ASSERT_NE(pair, nullptr);
  ASSERT_EQ(pair->size(), 2);
  CpuBackend backend(1);
  std::string error;
  ASSERT_TRUE(backend.JoinTensorGroup(pair.get(), &error)) << error;
  std::vector<float> x = {1.f + comm.rank(), 10.f * comm.rank()};
  backend.AllReduceSum(x.data(), 2);
  const int32_t first = comm.rank() / 2 * 2;
  EXPECT_EQ(x[0], 1.f + first + 1.f + first + 1);
  EXPECT_EQ(x[1], 10.f * first + 10.f * (first + 1));
  std::vector<float> gathered(4);
  const float mine[2] = {static_cast<float>(comm.rank()), -static_cast<float>(comm.rank())};
  backend.AllGather(mine, 2, gathered.data());
  EXPECT_EQ(gathered, (std::vector<float>{static_cast<float>(first), -static_cast<float>(first),
                                          static_cast<float>(first + 1), -static_cast<float>(first + 1)}));
  EXPECT_TRUE(comm.ok());
}

}  // namespace
}  // namespace ls::dist

int main(int argc, char** argv) {
  return ls::dist::RunMpiTests(argc, argv, std::chrono::seconds(30), &ls::dist::g_comm);
}
