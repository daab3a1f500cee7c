// A test fixture over one checkpoint directory (the parameter, under tests/data): the model loaded
// on a 2-thread CPU backend, engines over it with a float32 KV cache, and greedy requests of random
// prompts. Shared by the engine tests that run on every published family. SubmitTogether serves
// the other engine tests too.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/test_util.h"

namespace ls {

// Submits every request at once (Engine::SubmitAll: the first step sees them all, however loaded
// the host), each with a queue of its own appended to *queues.
inline absl::Status SubmitTogether(Engine& engine, std::vector<Request> reqs,
                                   std::vector<std::unique_ptr<OutputQueue>>* queues) {
  std::vector<OutputCallback> callbacks;
  for (size_t i = 0; i < reqs.size(); ++i) {
    queues->push_back(std::make_unique<OutputQueue>());
    callbacks.push_back(queues->back()->Callback());
  }
  return engine.SubmitAll(std::move(reqs), std::move(callbacks));
}

class CheckpointEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto m = LoadModel(testing::FixtureParamDir(GetParam()), &backend_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }
  std::unique_ptr<Engine> MakeEngine(EngineConfig cfg = {}) {
    cfg.kv_cache_dtype = DType::kF32;
    auto e = Engine::Create(model_.get(), nullptr, cfg);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::move(*e) : nullptr;
  }
  // A greedy request that runs to max_tokens.
  Request Req(const std::string& id, std::vector<int32_t> prompt, int32_t max_tokens) const {
    Request r;
    r.id = id;
    r.prompt_ids = std::move(prompt);
    r.params.max_tokens = max_tokens;
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    return r;
  }
  // Submits every request at once (SubmitTogether) and waits for each one's final output.
  static std::vector<RequestOutput> RunOutputs(Engine& engine, const std::vector<Request>& reqs) {
    std::vector<std::unique_ptr<OutputQueue>> qs;
    EXPECT_TRUE(SubmitTogether(engine, reqs, &qs).ok());
    std::vector<RequestOutput> out;
    for (auto& q : qs) out.push_back(q->WaitFinal());
    return out;
  }
  // The outputs are the same request for request: tokens, finish reason and count, and logprobs
  // within 2e-3 (a batch computes them in another order).
  static void ExpectSameOutputs(const std::vector<RequestOutput>& got, const std::vector<RequestOutput>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].token_ids, want[i].token_ids) << "request " << i;
      EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << "request " << i;
      EXPECT_EQ(got[i].completion_tokens, want[i].completion_tokens) << "request " << i;
      ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size()) << "request " << i;
      for (size_t j = 0; j < got[i].logprobs.size(); ++j)
        EXPECT_NEAR(got[i].logprobs[j].logprob, want[i].logprobs[j].logprob, 2e-3) << "request " << i << " token " << j;
    }
  }
  std::vector<int32_t> Prompt(std::mt19937& rng, int len) const {
    std::vector<int32_t> p(len);
    for (auto& t : p) t = static_cast<int32_t>(rng() % model_->config().vocab_size);
    return p;
  }

  CpuBackend backend_{2};
  std::unique_ptr<Model> model_;
};

}  // namespace ls
