// Greedy sequences' logits rows come back from Forward reduced to {argmax id, log-probability}
// records, computed where the logits are, in a batch mixed with sequences getting full rows: the
// records agree with the full rows of the same step, and the full rows are unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/logits_row.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/test_util.h"

namespace ls {
namespace {

// Four sequences prefilled together, then decoding: sequence 1 verifies three positions at once
// (a draft's rows) and sequence 3 decodes without logits; `greedy` marks those whose rows are
// reduced, `logprob` those whose records carry a log-probability. Returns each step's logits.
std::vector<std::vector<float>> RunSteps(Model& model, const std::vector<bool>& greedy,
                                         const std::vector<bool>& logprob, std::vector<StepBatch>* batches) {
  const int64_t V = model.config().vocab_size;
  KvCache cache(model.backend(), model.kv_layout(), 64, 4, DType::kF32, 4);
  std::mt19937 rng(5);
  std::vector<int32_t> pos(4, 0);
  std::vector<std::vector<float>> out;
  for (int step = 0; step < 3; ++step) {
    StepBatch b;
    for (int32_t i = 0; i < 4; ++i) {
      StepSequence s;
      for (int32_t k = 0; k < 12; ++k) s.block_table.push_back(i * 12 + k);
      s.state_slot = i;
      s.start_pos = pos[i];
      s.num_tokens = step == 0 ? 5 + i : i == 1 ? 3 : 1;
      s.all_logits = step > 0 && i == 1;
      s.want_logits = !(step > 0 && i == 3);
      s.greedy = greedy[i];
      s.greedy_logprob = logprob[i];
      for (int32_t t = 0; t < s.num_tokens; ++t) b.tokens.push_back(static_cast<int32_t>(rng() % V));
      pos[i] += s.num_tokens;
      b.seqs.push_back(s);
    }
    std::vector<float> logits;
    EXPECT_TRUE(model.Forward(b, cache, &logits).ok());
    EXPECT_EQ(static_cast<int64_t>(logits.size()), b.num_logit_floats(V));
    out.push_back(logits);
    batches->push_back(b);
  }
  return out;
}

TEST(GreedyRecords, RecordsAgreeWithTheFullRowsOfTheSameStep) {
  for (const std::string name : {"latent_sigmoid_situ_bf16", "plain_sigmoid_silu_shared_hd24_bf16_sharded"}) {
    CpuBackend backend(2);
    auto model = LoadModel(testing::FixtureDir(name), &backend);
    ASSERT_TRUE(model.ok()) << model.status();
    const int64_t V = (*model)->config().vocab_size;
    std::vector<StepBatch> full_batches, mixed_batches;
    const auto full = RunSteps(**model, {false, false, false, false}, {false, false, false, false}, &full_batches);
    const auto mixed = RunSteps(**model, {true, true, false, true}, {true, false, false, true}, &mixed_batches);
    for (size_t step = 0; step < full.size(); ++step) {
      size_t f = 0, m = 0;  // where each sequence's rows start in the two results
      for (size_t i = 0; i < 4; ++i) {
        const StepSequence& s = mixed_batches[step].seqs[i];
        for (int64_t r = 0; r < StepBatch::logit_rows(s); ++r) {
          const float* row = full[step].data() + f + r * V;
          if (!s.greedy) {
            EXPECT_EQ(0.f, testing::MaxAbsDiff(row, mixed[step].data() + m + r * V, V)) << name << " step " << step;
            continue;
          }
          const float* record = mixed[step].data() + m + r * kGreedyRecordFloats;
          const int32_t id = ArgmaxRow(row, V);
          EXPECT_EQ(record[0], static_cast<float>(id)) << name << " step " << step << " sequence " << i;
          if (s.greedy_logprob) {
            EXPECT_EQ(record[1], row[id] - LogSumExpRow(row, V)) << name << " step " << step << " sequence " << i;
            EXPECT_LT(record[1], 0.f);
          } else {
            EXPECT_TRUE(std::isnan(record[1]));
          }
        }
        f += StepBatch::logit_rows(s) * V;
        m += StepBatch::logit_rows(s) * (s.greedy ? kGreedyRecordFloats : V);
      }
      EXPECT_EQ(m, mixed[step].size());
    }
  }
}

}  // namespace
}  // namespace ls
