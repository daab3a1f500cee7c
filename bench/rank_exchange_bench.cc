// Rank group step anatomy: how much of a step the MoE exchange between ranks takes. Run by mpirun
// (`mpirun -np R rank_exchange_bench [MODEL_DIR] [ROUNDS] [TENSOR_PARALLEL]`; -np 1 runs the same
// workload in one process for the step time alone). With TENSOR_PARALLEL T > 1 the ranks form
// tensor-parallel groups of T, and rank 0 also reports the share of the steps' time its group's
// all-reduces and all-gathers took. The engine on rank 0 serves rounds of concurrent greedy
// requests through the group — the server's own path without the front ends — and records every
// step: its wall time on rank 0 (plan out, own share, replies in) and the time rank 0 and the
// slowest worker spent inside the MoE exchanges (row counts, slot ids, rows out and results back).
// Prints JSON: per round the medians over its decode steps and over its prefill steps, then the
// median of the rounds' medians.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/positional_args.h"
#include "dist/communicator.h"
#include "dist/launch_env.h"
#include "dist/leader_group.h"
#include "dist/worker_loop.h"
#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "models/registry.h"

namespace {

using ls::dist::StepTiming;
using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// One process alone: the same steps, timed around the model's forward.
class TimedLocalGroup final : public ls::RankGroup {
 public:
  explicit TimedLocalGroup(ls::Model* model) : local_(model) {}
  int32_t size() const override { return 1; }
  absl::Status Start(const ls::RankCacheSpec& c, const ls::LayerPlacements& p) override { return local_.Start(c, p); }
  absl::Status Step(const std::vector<ls::StepBatch>& batches, ls::KvCache& cache,
                    std::vector<std::vector<float>>* logits, std::vector<std::vector<float>>* hidden) override {
    const auto t0 = Clock::now();
    absl::Status st = local_.Step(batches, cache, logits, hidden);
    StepTiming t;
    t.tokens = static_cast<int64_t>(batches[0].tokens.size());
    t.step_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    timings.push_back(t);
    return st;
  }
  std::chrono::milliseconds idle_interval() const override { return local_.idle_interval(); }
  absl::Status Idle() override { return local_.Idle(); }
  void PreparePlacement(int64_t e, const ls::LayerPlacements& p) override { local_.PreparePlacement(e, p); }
  bool PlacementBuilt(int64_t e) const override { return local_.PlacementBuilt(e); }
  void SwitchPlacement(int64_t e) override { local_.SwitchPlacement(e); }
  std::vector<ls::RankExpertMemory> BuiltMemory() const override { return local_.BuiltMemory(); }
  void Stop() override {}
  std::vector<StepTiming> timings;

 private:
  ls::LocalRankGroup local_;
};

// Serves `rounds` rounds of `seqs` concurrent requests; returns each round's step timings.
std::vector<std::vector<StepTiming>> Serve(ls::Engine& engine, int rounds, int seqs, int32_t vocab,
                                           const std::function<std::vector<StepTiming>()>& take) {
  std::vector<std::vector<StepTiming>> out;
  for (int round = 0; round < rounds; ++round) {
    take();  // nothing from before this round
    std::vector<std::unique_ptr<ls::OutputQueue>> qs;
    for (int i = 0; i < seqs; ++i) {
      ls::Request r;
      r.id = absl::StrCat("r", round, "-", i);
      for (int t = 0; t < 48; ++t) r.prompt_ids.push_back(1 + (round * 131 + i * 17 + t * 7) % (vocab - 1));
      r.params.max_tokens = 32;
      r.params.temperature = 0;
      r.params.ignore_eos = true;
      qs.push_back(std::make_unique<ls::OutputQueue>());
      if (!engine.Submit(r, qs.back()->Callback()).ok()) std::abort();
    }
    for (auto& q : qs) q->WaitFinal();
    out.push_back(take());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  ls::bench::PositionalArgs args(argc, argv, "rank_exchange_bench [MODEL_DIR [ROUNDS [TENSOR_PARALLEL]]]");
  const std::string dir = args.Str("MODEL_DIR", "models/tiny");
  const int rounds = args.Int("ROUNDS", 5, 1, 1000), seqs = 8;
  const int32_t tp = args.Int("TENSOR_PARALLEL", 1, 1, 1024);
  args.End();
  std::unique_ptr<ls::dist::Communicator> comm;
  if (ls::dist::LaunchedGroupSize() > 1) {
    auto c = ls::dist::Communicator::Init(&argc, &argv);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", std::string(c.status().message()).c_str());
      return 1;
    }
    comm = std::move(*c);
  }
  const int32_t ranks = comm ? comm->size() : 1;
  ls::CpuBackend backend(1);  // one thread per rank: the ranks share this machine's cores
  ls::LoadOptions load;
  load.routed_experts_on_host = comm != nullptr;
  std::unique_ptr<ls::dist::Communicator> tensor;
  if (tp > 1) {
    if (!comm || comm->size() % tp != 0) {
      std::fprintf(stderr, "tensor parallelism of %d needs a multiple of %d ranks\n", tp, tp);
      return 1;
    }
    tensor = comm->Split(comm->rank() / tp);
    load.tensor_parallel = {tensor->rank(), tp};
  }
  auto model = ls::LoadModel(dir, &backend, load);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  ls::dist::RankTimeouts timeouts;
  if (comm) {
    if (!(*model)->JoinRankGroup(comm.get()).ok()) return 1;
    if (tensor && !(*model)->JoinTensorGroup(tensor.get()).ok()) return 1;
    if (comm->rank() != 0) return ls::dist::WorkerLoop(model->get(), comm.get(), timeouts).Run();
  }
  std::unique_ptr<ls::dist::LeaderGroup> leader;
  std::unique_ptr<TimedLocalGroup> local;
  ls::EngineConfig cfg;
  cfg.scheduler.max_num_seqs = seqs;
  cfg.kv_cache_bytes = size_t{64} << 20;
  cfg.experts.num_devices = ranks;  // the same expert-parallel path in one process as across ranks
  std::function<std::vector<StepTiming>()> take;
  if (comm) {
    leader = std::make_unique<ls::dist::LeaderGroup>(model->get(), comm.get(), timeouts, tp);
    leader->RecordTimings(true);
    cfg.ranks = leader.get();
    take = [&] { return leader->TakeTimings(); };
  } else {
    local = std::make_unique<TimedLocalGroup>(model->get());
    cfg.ranks = local.get();
    take = [&] { return std::exchange(local->timings, {}); };
  }
  auto engine = ls::Engine::Create(model->get(), nullptr, cfg);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  // The tensor-parallel collectives' seconds per round (rank 0's), beside the rounds' step timings.
  std::vector<double> tensor_seconds;
  auto take_round = [&] {
    tensor_seconds.push_back(tensor ? tensor->TakeExchangeSeconds() : 0);
    return take();
  };
  const auto per_round = Serve(**engine, rounds, seqs, static_cast<int32_t>((*model)->config().vocab_size), take_round);
  engine->reset();
  if (leader) leader->Stop();

  // A decode step computes one token per running sequence; a prefill step computes more.
  std::string json = absl::StrCat("{\"model\": \"", dir, "\", \"ranks\": ", ranks, ", \"tensor_parallel\": ", tp,
                                  ", \"threads_per_rank\": 1, ", "\"cores\": ", sysconf(_SC_NPROCESSORS_ONLN),
                                  ", \"sequences\": ", seqs, ", \"rounds\": [");
  std::vector<double> step_med[2], exch_med[2], worker_med[2], tensor_share;
  for (size_t r = 0; r < per_round.size(); ++r) {
    std::vector<double> step[2], exch[2], worker[2];
    double round_seconds = 0;
    for (const StepTiming& t : per_round[r]) round_seconds += t.step_seconds;
    // Taken once before the round and once after it: the second of each pair is the round's.
    const double tensor_round = 2 * r + 1 < tensor_seconds.size() ? tensor_seconds[2 * r + 1] : 0;
    tensor_share.push_back(round_seconds > 0 ? tensor_round / round_seconds : 0);
    for (const StepTiming& t : per_round[r]) {
      const int kind = t.tokens > seqs ? 1 : 0;
      step[kind].push_back(1e3 * t.step_seconds);
      exch[kind].push_back(1e3 * t.exchange_seconds);
      worker[kind].push_back(1e3 * t.worker_exchange_max);
    }
    absl::StrAppendFormat(&json, "%s{\"tensor_parallel_share\": %.3f, ", r ? ", " : "", tensor_share.back());
    for (int kind = 0; kind < 2; ++kind) {
      const double s = Median(step[kind]), e = Median(exch[kind]), w = Median(worker[kind]);
      step_med[kind].push_back(s);
      exch_med[kind].push_back(e);
      worker_med[kind].push_back(w);
      absl::StrAppendFormat(&json,
                            "%s\"%s\": {\"steps\": %d, \"step_ms\": %.3f, \"exchange_ms\": %.3f, "
                            "\"worker_exchange_ms\": %.3f, \"exchange_share\": %.3f}",
                            kind ? ", " : "", kind ? "prefill" : "decode", step[kind].size(), s, e, w,
                            s > 0 ? e / s : 0);
    }
    json += "}";
  }
  absl::StrAppendFormat(&json, "], \"median_of_rounds\": {\"tensor_parallel_share\": %.3f, ", Median(tensor_share));
  for (int kind = 0; kind < 2; ++kind) {
    const double s = Median(step_med[kind]), e = Median(exch_med[kind]), w = Median(worker_med[kind]);
    absl::StrAppendFormat(&json,
                          "%s\"%s\": {\"step_ms\": %.3f, \"exchange_ms\": %.3f, \"worker_exchange_ms\": %.3f, "
                          "\"exchange_share\": %.3f}",
                          kind ? ", " : "", kind ? "prefill" : "decode", s, e, w, s > 0 ? e / s : 0);
  }
  json += "}}";
  std::printf("%s\n", json.c_str());
  return 0;
}
