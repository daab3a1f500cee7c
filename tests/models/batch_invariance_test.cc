// A batch of sequences of different lengths, prefilling and decoding together, gives exactly
// the logits each sequence gives alone.
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/cpu_backend.h"
#include "tests/test_util.h"

namespace ls {
namespace {

struct Seq {
  int32_t salt = 0;  // varies the decode tokens between sequences
  std::vector<int32_t> prompt;
  std::vector<int32_t> blocks;
};

// Prefill then `steps` greedy-free decode steps feeding fixed ids; returns every logits row.
std::vector<std::vector<float>> RunSteps(Model& model, const std::vector<Seq>& seqs, int steps) {
  const int64_t V = model.config().vocab_size;
  KvCache cache(model.backend(), model.kv_layout(), 64, 4, DType::kF32, static_cast<int32_t>(seqs.size()));
  std::vector<std::vector<float>> out(seqs.size());
  std::vector<int32_t> pos(seqs.size(), 0);
  std::vector<float> logits;
  for (int step = 0; step <= steps; ++step) {
    StepBatch b;
    for (size_t i = 0; i < seqs.size(); ++i) {
      StepSequence s;
      s.block_table = seqs[i].blocks;
      s.state_slot = static_cast<int32_t>(i);
      s.start_pos = pos[i];
      s.all_logits = step == 0;
      if (step == 0) {
        b.tokens.insert(b.tokens.end(), seqs[i].prompt.begin(), seqs[i].prompt.end());
        s.num_tokens = static_cast<int32_t>(seqs[i].prompt.size());
      } else {
        b.tokens.push_back(static_cast<int32_t>((step * 31 + seqs[i].salt * 7) % V));
        s.num_tokens = 1;
      }
      pos[i] += s.num_tokens;
      b.seqs.push_back(s);
    }
    EXPECT_TRUE(model.Forward(b, cache, &logits).ok());
    size_t off = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const size_t rows = step == 0 ? seqs[i].prompt.size() : 1;
      out[i].insert(out[i].end(), logits.begin() + off, logits.begin() + off + rows * V);
      off += rows * V;
    }
  }
  return out;
}

TEST(BatchInvariance, BatchedLogitsEqualEachSequenceAlone) {
  for (const std::string name : {"latent_sigmoid_situ_bf16", "plain_sigmoid_silu_shared_hd24_bf16_sharded"}) {
    CpuBackend backend(2);
    auto model = LoadModel(testing::FixtureDir(name), &backend);
    ASSERT_TRUE(model.ok()) << model.status();
    std::mt19937 rng(3);
    std::vector<Seq> seqs;
    int32_t next_block = 0;
    for (int len : {1, 7, 13, 4, 22}) {
      Seq s;
      s.salt = static_cast<int32_t>(seqs.size());
      for (int i = 0; i < len; ++i) s.prompt.push_back(static_cast<int32_t>(rng() % (*model)->config().vocab_size));
      for (int b = 0; b < 10; ++b) s.blocks.push_back(next_block++);
      seqs.push_back(s);
    }
    auto batched = RunSteps(**model, seqs, 6);
    for (size_t i = 0; i < seqs.size(); ++i) {
      auto alone = RunSteps(**model, {seqs[i]}, 6);
      ASSERT_EQ(alone[0].size(), batched[i].size());
      EXPECT_EQ(testing::MaxAbsDiff(alone[0].data(), batched[i].data(), alone[0].size()), 0.f)
          << name << " sequence " << i;
    }
  }
}

}  // namespace
}  // namespace ls
