// The engine tests' fixture: a model from the latent_sigmoid_situ_bf16 fixture on a two-thread CPU
// backend, engines over it, and requests run concurrently to their end (engine_test.cc,
// expert_balancing_engine_test.cc). Owns the backend and the model; each test its engines.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/engine/checkpoint_engine.h"
#include "tests/test_util.h"

namespace ls {

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = LoadModel(testing::FixtureDir("latent_sigmoid_situ_bf16"), &backend_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }
  std::unique_ptr<Engine> MakeEngine(EngineConfig cfg = {}) {
    auto e = Engine::Create(model_.get(), nullptr, cfg);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(*e);
  }
  static Request Req(const std::string& id, std::vector<int32_t> prompt, int32_t max_tokens, float temperature = 0,
                     std::optional<uint64_t> seed = std::nullopt) {
    Request r;
    r.id = id;
    r.prompt_ids = std::move(prompt);
    r.params.max_tokens = max_tokens;
    r.params.temperature = temperature;
    r.params.seed = seed;
    r.params.ignore_eos = true;
    return r;
  }
  static std::vector<int32_t> Prompt(std::mt19937& rng, int len) {
    std::vector<int32_t> p(len);
    for (auto& t : p) t = static_cast<int32_t>(3 + rng() % 500);
    return p;
  }
  // Runs requests concurrently on `engine` and returns their token ids.
  static std::vector<std::vector<int32_t>> RunAll(Engine& engine, const std::vector<Request>& reqs) {
    std::vector<std::unique_ptr<OutputQueue>> qs;
    for (const auto& r : reqs) {
      qs.push_back(std::make_unique<OutputQueue>());
      EXPECT_TRUE(engine.Submit(r, qs.back()->Callback()).ok());
    }
    std::vector<std::vector<int32_t>> out;
    for (auto& q : qs) {
      RequestOutput o = q->WaitFinal();
      EXPECT_EQ(o.finish_reason, FinishReason::kLength) << o.error;
      out.push_back(o.token_ids);
    }
    return out;
  }
  CpuBackend backend_{2};
  std::unique_ptr<Model> model_;
};

}  // namespace ls
