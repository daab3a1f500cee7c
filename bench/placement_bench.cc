// Expert placement: max/mean device load per MoE layer for D = 4 and 8 devices, statically
// spread (expert e on device e mod D, no spare slots) and planned with 0, 1 and 2 spare slots per
// device, on Zipf-skewed expert popularity (plan from one batch of tokens, measure on a fresh one)
// and on the tiny model's real routing over held-out text. Prints JSON.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/positional_args.h"
#include "engine/expert_planner.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_ops.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"

namespace {

using ls::ExpertPlacement;

// Routed expert ids [T, K]: K distinct experts per token, chosen with probability ∝ rank^-a over
// a random permutation of the experts.
std::vector<int32_t> ZipfRouting(int32_t n, int32_t k, double a, int64_t tokens, std::mt19937_64& rng,
                                 const std::vector<int32_t>& perm) {
  std::vector<double> w(n);
  for (int32_t r = 0; r < n; ++r) w[perm[r]] = std::pow(r + 1.0, -a);
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> ww = w;
    for (int32_t j = 0; j < k; ++j) {
      std::discrete_distribution<int32_t> pick(ww.begin(), ww.end());
      const int32_t e = pick(rng);
      ids.push_back(e);
      ww[e] = 0;
    }
  }
  return ids;
}

std::vector<double> Loads(const std::vector<int32_t>& ids, int32_t n) {
  std::vector<double> l(n, 0);
  for (int32_t e : ids) l[e] += 1;
  return l;
}

// Realized max/mean device load when `ids` are dispatched over `p`.
double Realized(const ExpertPlacement& p, const std::vector<int32_t>& ids) {
  std::vector<double> dev(p.num_devices, 0);
  for (int32_t s : ls::DispatchSlots(p, ids.data(), static_cast<int64_t>(ids.size()))) dev[p.device_of(s)] += 1;
  return ls::MaxOverMean(dev);
}

ExpertPlacement Static(int32_t n, int32_t d) {
  ExpertPlacement p;
  p.num_experts = n;
  p.num_devices = d;
  p.slots_per_device = (n + d - 1) / d;
  p.slot_expert.assign(static_cast<size_t>(d) * p.slots_per_device, -1);
  std::vector<int32_t> used(d, 0);
  for (int32_t e = 0; e < n; ++e) p.slot_expert[(e % d) * p.slots_per_device + used[e % d]++] = e;
  p.Index();
  return p;
}

nlohmann::json Compare(const std::vector<int32_t>& plan_ids, const std::vector<int32_t>& eval_ids, int32_t n) {
  nlohmann::json out = nlohmann::json::array();
  const std::vector<double> loads = Loads(plan_ids, n);
  for (int32_t d : {4, 8}) {
    nlohmann::json row = {{"devices", d}, {"static_no_replication", Realized(Static(n, d), eval_ids)}};
    for (int32_t spare : {0, 1, 2}) {
      auto p = ls::PlanPlacement(loads, d, (n + d - 1) / d + spare);
      row["planned_spare_" + std::to_string(spare)] = p.ok() ? Realized(*p, eval_ids) : -1.0;
    }
    out.push_back(row);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  ls::bench::PositionalArgs args(argc, argv, "placement_bench [REPOSITORY_ROOT]");
  const std::string root = args.Str("REPOSITORY_ROOT", ".");
  args.End();
  nlohmann::json report = {{"benchmark", "expert_placement"}, {"metric", "max/mean routed rows per device"}};
  std::mt19937_64 rng(7);
  nlohmann::json zipf = nlohmann::json::array();
  for (auto [n, k] : {std::pair<int32_t, int32_t>{64, 4}, {896, 16}}) {
    std::vector<int32_t> perm(n);
    for (int32_t i = 0; i < n; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (double a : {0.6, 1.0, 1.4}) {
      const int64_t tokens = n == 64 ? 4096 : 1024;
      const auto plan_ids = ZipfRouting(n, k, a, tokens, rng, perm);
      const auto eval_ids = ZipfRouting(n, k, a, tokens, rng, perm);
      zipf.push_back({{"experts", n}, {"top_k", k}, {"zipf_exponent", a}, {"tokens", tokens},
                      {"results", Compare(plan_ids, eval_ids, n)}});
    }
  }
  report["zipf"] = zipf;

  // The tiny model's routing over held-out text, per MoE layer (planned and measured on the same
  // tokens: there are only a few hundred).
  const std::string model_dir = root + "/models/tiny", heldout = root + "/tests/data/tiny/heldout.json";
  if (std::filesystem::exists(heldout)) {
    ls::CpuBackend backend(0);
    auto model = ls::LoadModel(model_dir, &backend);
    std::ifstream in(heldout);
    std::stringstream ss;
    ss << in.rdbuf();
    auto seqs = nlohmann::json::parse(ss.str())["ids"].get<std::vector<std::vector<int32_t>>>();
    if (model.ok()) {
      const auto& c = (*model)->config();
      std::vector<std::vector<float>> sink;
      (*model)->CaptureRouterLogits(&sink);
      std::vector<float> logits;
      for (const auto& ids : seqs) (void)(*model)->ForwardSequence(ids, /*all_logits=*/false, &logits);
      nlohmann::json layers = nlohmann::json::array();
      for (int32_t l = 0; l < c.num_hidden_layers; ++l) {
        if (!c.is_moe_layer(l)) continue;
        // Re-route from the captured logits with the model's biases, as the router does.
        const int64_t T = static_cast<int64_t>(sink[l].size()) / c.moe.num_experts;
        std::vector<int32_t> ids(T * c.moe.top_k);
        std::vector<float> w(T * c.moe.top_k);
        ls::ThreadPool pool(1);
        ls::RouterParams r;
        r.logits = sink[l].data();
        r.bias = (*model)->router_bias(l).data();
        r.num_tokens = T;
        r.num_experts = c.moe.num_experts;
        r.top_k = c.moe.top_k;
        r.scoring = c.moe.scoring;
        r.topk_ids = ids.data();
        r.topk_weights = w.data();
        ls::cpu::Router(pool, r);
        layers.push_back({{"layer", l}, {"tokens", T}, {"results", Compare(ids, ids, c.moe.num_experts)}});
      }
      report["tiny_model_heldout"] = layers;
    }
  }
  std::printf("%s\n", report.dump(1).c_str());
  return 0;
}
