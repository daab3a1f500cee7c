// The rank group's messages: a leader's plan and a worker's reply survive encoding unchanged, and
// damaged bytes (every truncation, a wrong magic number, an unknown kind, a placement that does not
// validate, counts that do not add up, trailing bytes) are errors naming what could not be read,
// never a crash. No MPI.
#include "dist/step_message.h"

#include <gtest/gtest.h>

#include "engine/expert_planner.h"

namespace ls::dist {
namespace {

StepMessage Plan() {
  StepMessage m;
  m.kind = StepKind::kStep;
  m.cache = {64, 16, 4, DType::kBF16};
  StepBatch b0;
  b0.tokens = {5, 6, 7, 8};
  StepSequence s;
  s.num_tokens = 3;
  s.start_pos = 0;
  s.block_table = {2, 9};
  s.all_logits = true;
  s.greedy = true;
  b0.seqs.push_back(s);
  s.num_tokens = 1;
  s.start_pos = 40;
  s.block_table = {1, 3, 4};
  s.all_logits = false;
  s.want_logits = false;
  s.greedy = false;
  s.greedy_logprob = true;
  s.state_slot = 3;
  b0.seqs.push_back(s);
  b0.copies = {{CacheCopy::kState, 3, 7}, {CacheCopy::kBlock, 12, 4}};
  m.batch = b0;
  auto p = PlanPlacement({9, 1, 1, 1, 5, 1, 1, 1}, 2, 5);
  EXPECT_TRUE(p.ok());
  m.prepare = PlacementUpdate{7, {{1, *p}, {2, *p}}};
  m.switch_epoch = 6;
  m.want_hidden = true;
  return m;
}

TEST(StepMessage, PlanSurvivesEncoding) {
  const StepMessage m = Plan();
  auto got = DecodeStepMessage(Encode(m));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->kind, StepKind::kStep);
  EXPECT_EQ(got->cache.num_blocks, 64);
  EXPECT_EQ(got->cache.dtype, DType::kBF16);
  EXPECT_EQ(got->batch.tokens, m.batch.tokens);
  ASSERT_EQ(got->batch.seqs.size(), 2u);
  EXPECT_EQ(got->batch.seqs[1].block_table, m.batch.seqs[1].block_table);
  EXPECT_EQ(got->batch.seqs[1].start_pos, 40);
  EXPECT_EQ(got->batch.seqs[1].state_slot, 3);
  EXPECT_TRUE(got->batch.seqs[0].all_logits);
  EXPECT_FALSE(got->batch.seqs[1].want_logits);
  EXPECT_TRUE(got->batch.seqs[0].greedy);
  EXPECT_FALSE(got->batch.seqs[0].greedy_logprob);
  EXPECT_FALSE(got->batch.seqs[1].greedy);
  EXPECT_TRUE(got->batch.seqs[1].greedy_logprob);
  EXPECT_EQ(got->batch.num_logit_rows(), 3);
  EXPECT_EQ(got->batch.num_logit_floats(1000), 3 * kGreedyRecordFloats) << "three greedy records";
  EXPECT_EQ(got->batch.copies, m.batch.copies);
  StepMessage idle;
  EXPECT_TRUE(DecodeStepMessage(Encode(idle))->batch.seqs.empty()) << "a rank with nothing to run";
  ASSERT_TRUE(got->prepare.has_value());
  EXPECT_EQ(got->prepare->epoch, 7);
  ASSERT_EQ(got->prepare->layers.size(), 2u);
  EXPECT_EQ(got->prepare->layers[1].first, 2);
  const ExpertPlacement& p = got->prepare->layers[0].second;
  EXPECT_EQ(p.slot_expert, m.prepare->layers[0].second.slot_expert);
  EXPECT_EQ(p.replicas, m.prepare->layers[0].second.replicas) << "replicas are indexed for dispatch";
  EXPECT_EQ(got->switch_epoch, 6);
  EXPECT_TRUE(got->want_hidden);
}

TEST(StepMessage, ReplySurvivesEncoding) {
  WorkerReply r;
  r.logits = {1.5f, -2.f, 3.25f};
  r.hidden = {0.5f, 7.f};
  r.expert_tokens = {1, 0, 7};
  r.device_rows = {4, 4};
  r.built_epoch = 3;
  r.built_memory = {1 << 20, 1 << 18};
  r.exchange_seconds = 0.25;
  r.pid = 4242;
  r.host = "node-1";
  auto got = DecodeWorkerReply(Encode(r));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->logits, r.logits);
  EXPECT_EQ(got->hidden, r.hidden);
  EXPECT_EQ(got->expert_tokens, r.expert_tokens);
  EXPECT_EQ(got->device_rows, r.device_rows);
  EXPECT_EQ(got->built_epoch, 3);
  EXPECT_EQ(got->built_memory.redundant_bytes, 1 << 18);
  EXPECT_EQ(got->exchange_seconds, 0.25);
  EXPECT_EQ(got->pid, 4242);
  EXPECT_EQ(got->host, "node-1");
  r.error = "its share of the step failed";
  EXPECT_EQ(DecodeWorkerReply(Encode(r))->error, r.error);
}

TEST(StepMessage, EveryTruncationIsAnErrorNotACrash) {
  const std::string plan = Encode(Plan());
  for (size_t n = 0; n < plan.size(); ++n) {
    auto got = DecodeStepMessage(std::string_view(plan).substr(0, n));
    ASSERT_FALSE(got.ok()) << "cut at " << n;
    EXPECT_NE(got.status().message().find("cannot read"), std::string::npos) << got.status();
  }
  WorkerReply r;
  r.logits.assign(10, 1.f);
  r.host = "h";
  const std::string reply = Encode(r);
  for (size_t n = 0; n < reply.size(); ++n) EXPECT_FALSE(DecodeWorkerReply(reply.substr(0, n)).ok()) << n;
}

TEST(StepMessage, DamagedValuesAreNamed) {
  std::string plan = Encode(Plan());
  std::string bad = plan;
  bad[0] ^= 1;
  EXPECT_NE(DecodeStepMessage(bad).status().message().find("magic"), std::string::npos);
  bad = plan;
  bad[4] = 9;  // the kind
  EXPECT_NE(DecodeStepMessage(bad).status().message().find("kind"), std::string::npos);
  EXPECT_NE(DecodeStepMessage(plan + "x").status().message().find("left over"), std::string::npos);
  EXPECT_FALSE(DecodeWorkerReply(plan).ok()) << "a plan is no reply";

  StepMessage m = Plan();
  m.prepare->layers[0].second.slot_expert[0] = 99;  // an expert the model does not have
  EXPECT_NE(DecodeStepMessage(Encode(m)).status().message().find("placement"), std::string::npos);
  m = Plan();
  m.batch.seqs[0].num_tokens = 2;  // the sequences no longer cover the tokens
  EXPECT_NE(DecodeStepMessage(Encode(m)).status().message().find("add up"), std::string::npos);
  m = Plan();
  m.batch.copies[1].src = -1;
  EXPECT_NE(DecodeStepMessage(Encode(m)).status().message().find("cache copy"), std::string::npos);
  m = Plan();
  m.kind = StepKind::kStart;
  m.cache.block_size = 0;
  EXPECT_NE(DecodeStepMessage(Encode(m)).status().message().find("cache"), std::string::npos);
}

}  // namespace
}  // namespace ls::dist
