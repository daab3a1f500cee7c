// A model served by a group of ranks, run by mpirun on every rank (ctest: -np 2 and -np 4): each
// rank holds only its devices' experts (prepared into their slots from the checkpoint's host
// tensors, as the server's ranks load) and runs its own sequences (data-parallel attention), the
// MoE layers exchanging rows over MPI, and every logit equals, bit for bit, the same sequences run
// in one process without expert parallelism — over prefill and cached decode steps, with a rank
// that has nothing to run in some steps, with hot experts replicated, after a placement switch made
// by every rank at the same step, and with two devices per rank.
#include <gtest/gtest.h>

#include <random>

#include "dist/communicator.h"
#include "engine/expert_planner.h"
#include "engine/rank_group.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/dist/mpi_test_main.h"
#include "tests/dist/skewed_placements.h"
#include "tests/test_util.h"

namespace ls::dist {
namespace {

Communicator* g_comm = nullptr;

struct Seq {
  std::vector<int32_t> prompt;
  std::vector<int32_t> blocks;  // in its own rank's cache (the reference cache: global ids)
  int32_t rank = 0;
  int32_t slot = 0;  // recurrent-state slot in its rank's cache
};

LayerPlacements Placements(const Model& model, int32_t devices, int32_t slots, uint32_t seed) {
  return testing::SkewedPlacements(model.config(), devices, slots, seed);
}

// The bytes of the redundant copies (replicas beyond an expert's first slot) on `rank`'s devices.
size_t RedundantBytes(const LayerPlacements& layers, int32_t rank, int32_t ranks, size_t expert_bytes) {
  size_t n = 0;
  for (const auto& [l, p] : layers) {
    const int32_t held = p.num_devices / ranks;
    for (int32_t s = rank * held * p.slots_per_device; s < (rank + 1) * held * p.slots_per_device; ++s)
      if (p.slot_expert[s] >= 0 && p.replicas[p.slot_expert[s]].front() != s) n += expert_bytes;
  }
  return n;
}

void RunFixture(const std::string& dir) {
  Communicator& comm = *g_comm;
  const int32_t R = comm.size(), me = comm.rank();
  CpuBackend backend(1), reference_backend(1);
  LoadOptions on_host;  // as a rank of the server loads: each slot prepared from the checkpoint
  on_host.routed_experts_on_host = true;
  auto model = LoadModel(dir, &backend, on_host);
  auto reference = LoadModel(dir, &reference_backend);
  ASSERT_TRUE(model.ok() && reference.ok()) << model.status() << reference.status();
  ASSERT_TRUE((*model)->JoinRankGroup(&comm).ok());
  const ModelConfig& c = (*model)->config();
  const int32_t N = static_cast<int32_t>(c.moe.num_experts), bs = 4;

  // Seven sequences of different lengths; sequence i runs on rank i % R.
  std::mt19937 rng(11);
  std::vector<Seq> seqs;
  std::vector<int32_t> next_block(R, 0), next_slot(R, 0);
  for (int i = 0; i < 7; ++i) {
    Seq s;
    for (int t = 0; t < 2 + 5 * i; ++t) s.prompt.push_back(static_cast<int32_t>(1 + rng() % (c.vocab_size - 1)));
    s.rank = i % R;
    s.slot = next_slot[s.rank]++;
    for (int b = 0; b < 16; ++b) s.blocks.push_back(next_block[s.rank]++);
    seqs.push_back(std::move(s));
  }
  KvCache cache(&backend, (*model)->kv_layout(), 16 * 7, bs, DType::kF32, 7);
  KvCache ref_cache(&reference_backend, (*reference)->kv_layout(), 16 * 7, bs, DType::kF32, 7);

  // Placements: uniform-like with a spare slot per device, then one with more spare slots for
  // hot-expert replicas (switched to mid-run), then two devices per rank.
  const std::vector<LayerPlacements> plans = {Placements(**model, R, (N + R - 1) / R + 1, 1),
                                              Placements(**model, R, (N + R - 1) / R + 3, 2),
                                              Placements(**model, 2 * R, (N + 2 * R - 1) / (2 * R) + 1, 3)};
  auto placed = (*model)->BuildPlacedExperts(plans[0]);
  ASSERT_TRUE(placed.ok()) << placed.status();
  (*model)->SetPlacedExperts(*placed);

  std::vector<int32_t> pos(seqs.size(), 0);
  for (int step = 0; step < 9; ++step) {
    if (step == 3 || step == 6) {  // every rank switches before the same step
      const LayerPlacements& next = plans[step / 3];
      auto built = (*model)->BuildPlacedExperts(next);
      ASSERT_TRUE(built.ok()) << built.status();
      (*model)->SetPlacedExperts(*built);
    }
    // The reference: every sequence of this step in one batch, one process, no placement.
    StepBatch all, mine;
    std::vector<size_t> in_step;
    for (size_t i = 0; i < seqs.size(); ++i) {
      // In steps 2 and 5 the last rank's sequences sit out: it runs an empty batch.
      if ((step == 2 || step == 5) && R > 1 && seqs[i].rank == R - 1) continue;
      in_step.push_back(i);
      StepSequence ss;
      ss.start_pos = pos[i];
      ss.all_logits = step == 0;
      ss.state_slot = static_cast<int32_t>(i);
      std::vector<int32_t> tokens;
      if (step == 0) {
        tokens = seqs[i].prompt;
      } else {
        tokens = {static_cast<int32_t>(1 + (step * 37 + i * 11) % (c.vocab_size - 1))};
      }
      ss.num_tokens = static_cast<int32_t>(tokens.size());
      for (int b = 0; b < 16; ++b) ss.block_table.push_back(static_cast<int32_t>(i) * 16 + b);
      all.tokens.insert(all.tokens.end(), tokens.begin(), tokens.end());
      all.seqs.push_back(ss);
      if (seqs[i].rank == me) {
        ss.block_table = seqs[i].blocks;
        ss.state_slot = seqs[i].slot;
        mine.tokens.insert(mine.tokens.end(), tokens.begin(), tokens.end());
        mine.seqs.push_back(ss);
      }
    }
    std::vector<float> want, got;
    ASSERT_TRUE((*reference)->Forward(all, ref_cache, &want).ok());
    ASSERT_TRUE((*model)->Forward(mine, cache, &got).ok());
    ASSERT_TRUE(comm.ok()) << comm.error();
    // Compare this rank's rows with the reference's rows of the same sequences.
    const int64_t V = c.vocab_size;
    int64_t want_row = 0, got_row = 0;
    for (size_t k = 0; k < in_step.size(); ++k) {
      const size_t i = in_step[k];
      const int64_t rows = all.seqs[k].all_logits ? all.seqs[k].num_tokens : 1;
      if (seqs[i].rank == me) {
        EXPECT_EQ(testing::MaxAbsDiff(got.data() + got_row * V, want.data() + want_row * V, rows * V), 0.f)
            << dir << " step " << step << " sequence " << i << " on rank " << me;
        got_row += rows;
      }
      want_row += rows;
      pos[i] += all.seqs[k].num_tokens;
    }
    EXPECT_EQ(got_row * V, static_cast<int64_t>(got.size()));
  }
  // Every routed pair was counted once, by the rank that routed it.
  int64_t counted = 0;
  for (int64_t n : (*model)->expert_token_counts()) counted += n;
  EXPECT_GT(counted, 0);
}

TEST(RankGroupModel, LatentMoeLogitsEqualOneProcessBitForBit) {
  RunFixture(testing::FixtureDir("latent_sigmoid_situ_bf16"));
}

TEST(RankGroupModel, KimiLinearLogitsEqualOneProcessBitForBit) {
  // KDA state slots and an MLA latent cache on every rank, eight experts over the ranks.
  RunFixture(testing::HfFixtureDir("kimi_linear_bf16"));
}

TEST(RankGroupModel, EachRankHoldsOnlyItsDevicesExpertsAndCountsItsReplicas) {
  Communicator& comm = *g_comm;
  CpuBackend backend(1);
  auto model = LoadModel(testing::FixtureDir("latent_sigmoid_situ_bf16"), &backend);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE((*model)->JoinRankGroup(&comm).ok());
  const int32_t R = comm.size(), N = static_cast<int32_t>((*model)->config().moe.num_experts);
  const int32_t S = (N + R - 1) / R + 2;
  const LayerPlacements layers = Placements(**model, R, S, 4);
  auto placed = (*model)->BuildPlacedExperts(layers);
  ASSERT_TRUE(placed.ok());
  // One expert's three weights (every expert has the same shapes and dtype).
  const ExpertPlacement& p0 = layers[0].second;
  const PlacedLayer* pl = (*placed)->layer(layers[0].first);
  ASSERT_NE(pl, nullptr);
  size_t expert_bytes = 0, held_slots = 0;
  for (int32_t s = 0; s < R * S; ++s) {
    const bool mine = s / S == comm.rank();
    EXPECT_EQ(!pl->gate[s].empty(), mine && p0.slot_expert[s] >= 0) << "slot " << s;
    if (mine && p0.slot_expert[s] >= 0) {
      expert_bytes = pl->gate[s].bytes() + pl->up[s].bytes() + pl->down[s].bytes();
      ++held_slots;
    }
  }
  ASSERT_GT(expert_bytes, 0u);
  size_t slots_all_layers = 0;
  for (const auto& [l, p] : layers)
    for (int32_t s = comm.rank() * S; s < (comm.rank() + 1) * S; ++s) slots_all_layers += p.slot_expert[s] >= 0;
  EXPECT_EQ((*placed)->rank_bytes(), slots_all_layers * expert_bytes);
  EXPECT_EQ((*placed)->redundant_bytes(), RedundantBytes(layers, comm.rank(), R, expert_bytes));
}

}  // namespace
}  // namespace ls::dist

int main(int argc, char** argv) {
  return ls::dist::RunMpiTests(argc, argv, std::chrono::seconds(30), &ls::dist::g_comm);
}
