// Expert placement planned before traffic, on the shipped tiny model (64 experts over 8 devices of
// 10 slots): the loads measured on a calibration set plan an initial placement whose device
// max/mean serving that text is below the uniform placement's, as the plan's own expectation says;
// loads measured on text the model samples itself give a plan that expects the same; the model's
// samples are seeded, in the vocabulary and of the asked length; calibration sets are read from
// text or ids with errors that name the file; a set run through a serving engine (as a rank
// group's is) plans, switches and leaves the window empty. (How well a plan carries over to other
// text is measured, not asserted: on this model's four held-out documents it does not reliably.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/read_file.h"
#include "engine/calibration.h"
#include "engine/engine.h"
#include "engine/engine_calibration.h"
#include "engine/expert_planner.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "tokenizer/load_tokenizer.h"

namespace ls {
namespace {

std::string TinyDir() {
  return std::filesystem::path(LS_TEST_DATA_DIR).parent_path().parent_path().string() + "/models/tiny";
}

class PlacementBeforeTraffic : public ::testing::Test {
 protected:
  static constexpr int32_t kDevices = 8, kSlots = 10;
  void SetUp() override {
    auto m = LoadModel(TinyDir(), &backend_);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    auto text = ReadFile(std::string(LS_TEST_DATA_DIR) + "/tiny/heldout.json");
    ASSERT_TRUE(text.ok());
    const nlohmann::json heldout = nlohmann::json::parse(*text);
    for (const auto& ids : heldout["ids"]) heldout_.push_back(ids.get<std::vector<int32_t>>());
    ASSERT_EQ(heldout_.size(), 4u);
  }
  // Serves `prompts` (kServedTokens greedy new tokens each, past an end of text too) on kDevices
  // devices of kSlots slots, placed from `loads` (uniform when empty); returns the device max/mean
  // over the MoE layers, mean over layers, and the metrics.
  static constexpr int32_t kServedTokens = 8;
  double Serve(const std::vector<std::vector<int32_t>>& prompts, std::map<int32_t, std::vector<double>> loads,
               MetricsSnapshot* metrics) {
    EngineConfig cfg;
    cfg.experts.num_devices = kDevices;
    cfg.experts.expert_slots = kSlots;
    cfg.experts.initial_loads = std::move(loads);
    cfg.warmup = false;
    auto engine = Engine::Create(model_.get(), nullptr, cfg);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return 0;
    std::vector<std::unique_ptr<OutputQueue>> qs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      Request r;
      r.id = std::to_string(i);
      r.prompt_ids = prompts[i];
      r.params.max_tokens = kServedTokens;
      r.params.temperature = 0;
      r.params.ignore_eos = true;  // as the calibration writes them
      qs.push_back(std::make_unique<OutputQueue>());
      EXPECT_TRUE((*engine)->Submit(r, qs.back()->Callback()).ok());
    }
    for (auto& q : qs) q->WaitFinal();
    *metrics = (*engine)->Metrics();
    const int32_t layers = model_->config().num_hidden_layers;
    double sum = 0;
    int n = 0;
    for (int32_t l = 0; l < layers; ++l) {
      if (!model_->config().is_moe_layer(l)) continue;
      sum += DeviceMaxOverMean(*metrics, l);
      ++n;
    }
    return sum / n;
  }
  static double DeviceMaxOverMean(const MetricsSnapshot& m, int32_t layer) {
    const int32_t D = kDevices;
    return MaxOverMean(std::vector<double>(m.device_rows.begin() + layer * D, m.device_rows.begin() + (layer + 1) * D));
  }

  CpuBackend backend_{2};
  std::unique_ptr<Model> model_;
  std::vector<std::vector<int32_t>> heldout_;
};

TEST_F(PlacementBeforeTraffic, CalibrationLoadsPlanABetterStartThanUniform) {
  auto loads = MeasureExpertLoads(*model_, heldout_);
  ASSERT_TRUE(loads.ok()) << loads.status();
  ASSERT_EQ(loads->size(), 4u) << "every MoE layer";
  int64_t tokens = 0;
  for (const auto& s : heldout_) tokens += static_cast<int64_t>(s.size());
  for (const auto& [l, v] : *loads) {
    ASSERT_EQ(v.size(), 64u);
    double sum = 0;
    for (double x : v) sum += x;
    EXPECT_EQ(sum, 4.0 * static_cast<double>(tokens)) << "top-4 routing of every token, layer " << l;
  }
  for (int64_t c : model_->expert_token_counts()) ASSERT_EQ(c, 0) << "counters left at zero";
  MetricsSnapshot uniform_m, planned_m;
  const double uniform = Serve(heldout_, {}, &uniform_m);
  const double planned = Serve(heldout_, *loads, &planned_m);
  EXPECT_EQ(uniform_m.planned_device_max_over_mean, 0) << "not planned";
  EXPECT_GE(planned_m.planned_device_max_over_mean, 1.0);
  EXPECT_LT(planned_m.planned_device_max_over_mean, planned_m.uniform_device_max_over_mean)
      << "the plan expects to beat uniform on its loads";
  EXPECT_LT(planned, uniform) << "and does serving that text";
  std::printf("device max/mean serving the calibration text: uniform %.4f, planned %.4f (expected %.4f vs %.4f)\n",
              uniform, planned, planned_m.planned_device_max_over_mean, planned_m.uniform_device_max_over_mean);
}

// The set served as traffic is (each prompt continued greedily): every layer but the last counts
// each prompt token and each token fed back, the last only the rows whose logits are read — the
// very counts of an engine serving the set — and the plan made from them fits the last layer's
// traffic better than one made from the prompts alone.
TEST_F(PlacementBeforeTraffic, ServedLoadsCountWhatEachLayerComputes) {
  const std::vector<std::vector<int32_t>> set = SplitIntoWindows(heldout_, 16);  // 16 prompts
  auto served = MeasureServedExpertLoads(*model_, set, kServedTokens);
  ASSERT_TRUE(served.ok()) << served.status();
  for (int64_t c : model_->expert_token_counts()) ASSERT_EQ(c, 0) << "counters left at zero";
  const ModelConfig& mc = model_->config();
  const int32_t N = mc.moe.num_experts, K = mc.moe.top_k, last = mc.num_hidden_layers - 1;
  int64_t prompt_tokens = 0;
  for (const auto& s : set) prompt_tokens += static_cast<int64_t>(s.size());
  const int64_t seqs = static_cast<int64_t>(set.size());
  MetricsSnapshot from_set, from_prompts;
  Serve(set, *served, &from_set);
  for (const auto& [l, v] : *served) {
    const double rows = l == last ? seqs * kServedTokens : prompt_tokens + seqs * (kServedTokens - 1);
    EXPECT_EQ(std::accumulate(v.begin(), v.end(), 0.0), K * rows) << "layer " << l;
    const std::vector<double> engine(from_set.expert_tokens.begin() + l * N,
                                     from_set.expert_tokens.begin() + (l + 1) * N);
    EXPECT_EQ(v, engine) << "an engine serving the set counts the same, layer " << l;
  }
  auto prompts_only = MeasureExpertLoads(*model_, set);
  ASSERT_TRUE(prompts_only.ok());
  Serve(set, *prompts_only, &from_prompts);
  const double fit = DeviceMaxOverMean(from_set, last), rough = DeviceMaxOverMean(from_prompts, last);
  EXPECT_LT(fit, rough) << "the last layer serves the written tokens";
  std::printf("last layer's device max/mean serving the set: planned from it served %.4f, from its prompts %.4f\n", fit,
              rough);
  // Tokens to write must leave the context room for a prompt; 0 counts the prompts alone.
  EXPECT_FALSE(MeasureServedExpertLoads(*model_, heldout_, static_cast<int32_t>(mc.max_position_embeddings)).ok());
  EXPECT_FALSE(MeasureServedExpertLoads(*model_, heldout_, -1).ok());
  auto zero = MeasureServedExpertLoads(*model_, set, 0);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(*zero, *prompts_only);
  // A prompt longer than the context less the tokens to write is split, as the engine admits it.
  const std::vector<std::vector<int32_t>> long_one{std::vector<int32_t>(250, 7)};
  auto split = MeasureServedExpertLoads(*model_, long_one, 10);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(std::accumulate((*split)[last].begin(), (*split)[last].end(), 0.0), K * 2 * 10) << "two windows";
  EXPECT_EQ(std::accumulate((*split)[0].begin(), (*split)[0].end(), 0.0), K * (250 + 2 * 9));
  // More sequences and prompt tokens than one batch holds: every one is served.
  std::vector<std::vector<int32_t>> many;
  for (int32_t i = 0; i < kServedCalibrationBatch + 44; ++i) many.push_back(std::vector<int32_t>(100, i % 500 + 3));
  ASSERT_GT(100 * kServedCalibrationBatch, kServedCalibrationTokens) << "the token budget splits the batches";
  auto all = MeasureServedExpertLoads(*model_, many, 2);
  ASSERT_TRUE(all.ok()) << all.status();
  const double n = static_cast<double>(many.size());
  EXPECT_EQ(std::accumulate((*all)[last].begin(), (*all)[last].end(), 0.0), K * n * 2);
  EXPECT_EQ(std::accumulate((*all)[0].begin(), (*all)[0].end(), 0.0), K * n * 101);
}

TEST_F(PlacementBeforeTraffic, TheModelsOwnSamplesGiveAPlan) {
  auto samples = SampleFromModel(*model_, 16, 128, 1);
  ASSERT_TRUE(samples.ok()) << samples.status();
  auto loads = MeasureServedExpertLoads(*model_, *samples, kServedTokens);  // served, as a single process plans
  ASSERT_TRUE(loads.ok()) << loads.status();
  MetricsSnapshot uniform_m, planned_m;
  const double uniform = Serve(heldout_, {}, &uniform_m);
  const double planned = Serve(heldout_, *loads, &planned_m);
  EXPECT_LT(planned_m.planned_device_max_over_mean, planned_m.uniform_device_max_over_mean);
  std::printf("device max/mean on held-out text: uniform %.4f, planned from the model's samples %.4f\n", uniform,
              planned);
}

TEST_F(PlacementBeforeTraffic, SamplesAreSeededInTheVocabularyAndOfTheAskedLength) {
  auto a = SampleFromModel(*model_, 3, 40, 7), b = SampleFromModel(*model_, 3, 40, 7),
       c = SampleFromModel(*model_, 3, 40, 8);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  ASSERT_EQ(a->size(), 3u);
  for (const auto& s : *a) {
    EXPECT_EQ(s.size(), 40u);
    for (int32_t t : s) EXPECT_TRUE(t >= 0 && t < model_->config().vocab_size);
  }
  // The context bounds the length; nothing to sample is an error.
  auto long_one = SampleFromModel(*model_, 1, 100000, 1);
  ASSERT_TRUE(long_one.ok());
  EXPECT_EQ(static_cast<int64_t>((*long_one)[0].size()), model_->config().max_position_embeddings);
  EXPECT_FALSE(SampleFromModel(*model_, 0, 10, 1).ok());
}

// The set run through an engine that already serves (the rank-group road): the engine re-plans
// from the load the set left, switches (one re-plan), and its window starts afresh; the plan
// expects to beat the uniform placement it replaced on that load; sampled sets work the same way.
TEST_F(PlacementBeforeTraffic, ASetRunThroughTheEnginePlansAndSwitches) {
  for (const auto& [sampled, max_tokens] :
       {std::pair{false, 0}, std::pair{false, kServedTokens}, std::pair{true, 0}, std::pair{true, kServedTokens}}) {
    EngineConfig cfg;
    cfg.experts.num_devices = kDevices;
    cfg.experts.expert_slots = kSlots;
    cfg.warmup = false;
    auto engine = Engine::Create(model_.get(), nullptr, cfg);
    ASSERT_TRUE(engine.ok()) << engine.status();
    const std::string uniform = (*engine)->PlacementJson();
    EngineCalibration c;
    if (!sampled) c.prompts = heldout_;
    c.max_tokens = max_tokens;
    c.samples = 4;
    c.sample_tokens = 32;
    c.timeout = std::chrono::seconds(60);
    auto r = PlanPlacementThroughEngine(**engine, c);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->sequences, 4);
    int64_t tokens = 0;
    for (const auto& h : heldout_) tokens += static_cast<int64_t>(h.size()) + std::max(max_tokens, 1);
    EXPECT_EQ(r->tokens, sampled ? 4 * 32 : tokens);
    EXPECT_GE(r->expected_device_max_over_mean, 1.0);
    EXPECT_LT(r->expected_device_max_over_mean, r->before_device_max_over_mean);
    if (!sampled) {  // tokens to write must leave the context room for a prompt
      EngineCalibration full = c;
      full.max_tokens = (*engine)->max_model_len();
      auto refused = PlanPlacementThroughEngine(**engine, full);
      ASSERT_FALSE(refused.ok());
      EXPECT_NE(refused.status().message().find("tokens to write after each calibration prompt"), std::string::npos)
          << refused.status();
    }
    const MetricsSnapshot m = (*engine)->Metrics();
    EXPECT_EQ(m.replans, 1u);
    EXPECT_NE((*engine)->PlacementJson(), uniform) << "the planned placement is in use";
    EXPECT_EQ((*engine)->ExpertWindow().steps, 0) << "the window starts afresh";
    // The prompts alone: every layer routed every token of the set, the last one too (whose FFN
    // otherwise runs only over the rows whose logits are read). Continued: every layer the prompts
    // and the tokens fed back, the last the rows whose logits are read, as serving runs them.
    const ModelConfig& mc = model_->config();
    const int32_t N = mc.moe.num_experts, K = mc.moe.top_k;
    std::vector<int64_t> routed;
    for (int32_t l = 0; l < mc.num_hidden_layers; ++l)
      routed.push_back(
          std::accumulate(m.expert_tokens.begin() + l * N, m.expert_tokens.begin() + (l + 1) * N, int64_t{0}));
    // Sampled and continued: only the continuation counts (4 samples of 32 tokens as prompts), not
    // the rows that wrote the samples.
    const std::string what = absl::StrCat(sampled ? "samples" : "prompts", ", ", max_tokens, " tokens written");
    if (max_tokens == 0) {
      EXPECT_EQ(routed, std::vector<int64_t>(routed.size(), routed[0])) << what;
      if (!sampled) {
        EXPECT_EQ(routed[0], (tokens - 4) * K);
      }
    } else {
      const int64_t prompt_rows = sampled ? 4 * 32 : tokens - 4 * max_tokens;
      std::vector<int64_t> expected(routed.size(), (prompt_rows + 4 * (max_tokens - 1)) * K);
      expected.back() = 4 * max_tokens * K;
      EXPECT_EQ(routed, expected) << what;
    }
  }
  // Without expert parallelism there is nothing to place.
  EngineConfig plain;
  plain.warmup = false;
  auto engine = Engine::Create(model_.get(), nullptr, plain);
  ASSERT_TRUE(engine.ok());
  auto r = PlanPlacementThroughEngine(**engine, EngineCalibration{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expert parallelism"), std::string::npos) << r.status();
}

TEST(CalibrationSet, ReadsTextAndIdsAndNamesWhatIsWrong) {
  auto tokenizer = tok::LoadTokenizer(TinyDir());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string dir = ::testing::TempDir();
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  auto text = ReadCalibrationSet(write("set.txt", "In the beginning\n\nAnd God said\n"), tokenizer->get());
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->size(), 2u) << "blank lines are skipped";
  EXPECT_EQ((*text)[0], *(*tokenizer)->Encode("In the beginning"));
  auto ids = ReadCalibrationSet(write("set.json", R"({"sequences": [[1, 2, 3], [4]]})"), nullptr);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<std::vector<int32_t>>{{1, 2, 3}, {4}}));
  for (const auto& [name, content, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"empty.txt", "\n\n", "no text to calibrate on"},
           {"bad.json", "[1]", "expected {\"sequences\""},
           {"hole.json", R"({"sequences": [[1], []]})", "sequence 1 is empty"},
           {"float.json", R"({"sequences": [[1.5]]})", "ids must be integers"}}) {
    auto r = ReadCalibrationSet(write(name, content), tokenizer->get());
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status();
  }
  auto no_tokenizer = ReadCalibrationSet(write("t.txt", "text"), nullptr);
  ASSERT_FALSE(no_tokenizer.ok());
  EXPECT_NE(no_tokenizer.status().message().find("tokenizer"), std::string::npos);
  EXPECT_FALSE(ReadCalibrationSet(dir + "/missing.txt", tokenizer->get()).ok());
}

}  // namespace
}  // namespace ls
