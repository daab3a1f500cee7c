// Expert placement planning and JSON.
#include "engine/expert_planner.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ls {

std::vector<int32_t> ReplicaCounts(const std::vector<double>& loads, int32_t num_devices, int32_t slots_per_device) {
  const int32_t n = static_cast<int32_t>(loads.size());
  std::vector<int32_t> r(n, 1);
  int64_t spare = static_cast<int64_t>(num_devices) * slots_per_device - n;
  while (spare-- > 0) {
    int32_t best = -1;
    for (int32_t e = 0; e < n; ++e) {
      if (r[e] >= num_devices) continue;
      if (best < 0 || loads[e] / r[e] > loads[best] / r[best]) best = e;
    }
    if (best < 0) break;
    ++r[best];
  }
  return r;
}

absl::StatusOr<ExpertPlacement> PlanPlacement(const std::vector<double>& loads, int32_t D, int32_t S) {
  const int32_t n = static_cast<int32_t>(loads.size());
  if (D < 1 || S < 1) return absl::InvalidArgumentError("devices and expert slots must be positive");
  if (static_cast<int64_t>(D) * S < n)
    return absl::InvalidArgumentError(absl::StrCat(D, " devices x ", S, " slots cannot hold ", n, " experts"));
  const std::vector<int32_t> reps = ReplicaCounts(loads, D, S);
  struct Replica {
    int32_t expert;
    double load;
  };
  std::vector<Replica> items;
  for (int32_t e = 0; e < n; ++e)
    for (int32_t i = 0; i < reps[e]; ++i) items.push_back({e, loads[e] / reps[e]});
  std::stable_sort(items.begin(), items.end(), [](const Replica& a, const Replica& b) { return a.load > b.load; });

  ExpertPlacement p;
  p.num_experts = n;
  p.num_devices = D;
  p.slots_per_device = S;
  p.slot_expert.assign(static_cast<size_t>(D) * S, -1);
  std::vector<double> device_load(D, 0);
  std::vector<int32_t> used(D, 0);
  std::vector<std::vector<bool>> has(D, std::vector<bool>(n, false));
  auto put = [&](int32_t d, const Replica& r) {
    p.slot_expert[d * S + used[d]++] = r.expert;
    has[d][r.expert] = true;
    device_load[d] += r.load;
  };
  for (const Replica& r : items) {
    int32_t best = -1;
    for (int32_t d = 0; d < D; ++d)
      if (used[d] < S && !has[d][r.expert] && (best < 0 || device_load[d] < device_load[best])) best = d;
    if (best >= 0) {
      put(best, r);
      continue;
    }
    // Every device with a free slot already holds this expert: move another replica from a device
    // lacking it onto a free slot where that replica's expert is absent, then take its place.
    bool placed = false;
    for (int32_t free_d = 0; free_d < D && !placed; ++free_d) {
      if (used[free_d] >= S) continue;
      for (int32_t d = 0; d < D && !placed; ++d) {
        if (has[d][r.expert] || d == free_d) continue;
        for (int32_t s = 0; s < used[d] && !placed; ++s) {
          const int32_t x = p.slot_expert[d * S + s];
          if (has[free_d][x]) continue;
          p.slot_expert[free_d * S + used[free_d]++] = x;
          has[free_d][x] = true;
          has[d][x] = false;
          const double xl = loads[x] / reps[x];
          device_load[free_d] += xl;
          device_load[d] += r.load - xl;
          p.slot_expert[d * S + s] = r.expert;
          has[d][r.expert] = true;
          placed = true;
        }
      }
    }
    if (!placed) return absl::InternalError(absl::StrCat("cannot place a replica of expert ", r.expert));
  }
  p.Index();
  if (auto s = p.Validate(); !s.ok()) return s;
  return p;
}

absl::StatusOr<ExpertPlacement> UniformPlacement(int32_t n, int32_t D, int32_t S) {
  if (D < 1 || S < 1 || static_cast<int64_t>(D) * S < n)
    return absl::InvalidArgumentError(absl::StrCat(D, " devices x ", S, " slots cannot hold ", n, " experts"));
  return PlanPlacement(std::vector<double>(n, 1.0), D, S);
}

std::vector<double> ExpectedDeviceLoads(const ExpertPlacement& p, const std::vector<double>& loads) {
  std::vector<double> out(p.num_devices, 0);
  for (int32_t s = 0; s < static_cast<int32_t>(p.slot_expert.size()); ++s) {
    const int32_t e = p.slot_expert[s];
    if (e >= 0) out[p.device_of(s)] += loads[e] / static_cast<double>(p.replicas[e].size());
  }
  return out;
}

double MaxOverMean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  const double sum = std::accumulate(v.begin(), v.end(), 0.0);
  if (sum <= 0) return 0;
  return *std::max_element(v.begin(), v.end()) * static_cast<double>(v.size()) / sum;
}

double MeanExpectedDeviceMaxOverMean(const std::vector<std::pair<int32_t, std::vector<double>>>& loads,
                                     const std::vector<std::pair<int32_t, ExpertPlacement>>& placements) {
  double sum = 0;
  for (size_t i = 0; i < loads.size() && i < placements.size(); ++i)
    sum += MaxOverMean(ExpectedDeviceLoads(placements[i].second, loads[i].second));
  return loads.empty() ? 0 : sum / static_cast<double>(loads.size());
}

absl::StatusOr<LoadPlan> PlanFromLoads(const std::map<int32_t, std::vector<double>>& loads, int32_t num_experts,
                                       int32_t num_devices, int32_t slots_per_device) {
  const std::vector<std::pair<int32_t, std::vector<double>>> layers(loads.begin(), loads.end());
  LoadPlan plan;
  std::vector<std::pair<int32_t, ExpertPlacement>> uniform;
  for (const auto& [l, v] : layers) {
    if (static_cast<int32_t>(v.size()) != num_experts)
      return absl::InvalidArgumentError(
          absl::StrCat("expected loads of layer ", l, " name ", v.size(), " experts, the model has ", num_experts));
    auto u = UniformPlacement(num_experts, num_devices, slots_per_device);
    if (!u.ok()) return u.status();
    uniform.emplace_back(l, std::move(*u));
    auto p = PlanPlacement(v, num_devices, slots_per_device);
    if (!p.ok()) return p.status();
    plan.placements.emplace_back(l, std::move(*p));
  }
  plan.expected_device_max_over_mean = MeanExpectedDeviceMaxOverMean(layers, plan.placements);
  plan.uniform_device_max_over_mean = MeanExpectedDeviceMaxOverMean(layers, uniform);
  return plan;
}

std::string PlacementsToJson(const std::vector<std::pair<int32_t, ExpertPlacement>>& layers) {
  nlohmann::json j = {{"num_devices", layers.empty() ? 0 : layers[0].second.num_devices},
                      {"slots_per_device", layers.empty() ? 0 : layers[0].second.slots_per_device},
                      {"layers", nlohmann::json::object()}};
  for (const auto& [l, p] : layers) j["layers"][std::to_string(l)] = p.slot_expert;
  return j.dump(1);
}

absl::StatusOr<std::vector<std::pair<int32_t, ExpertPlacement>>> PlacementsFromJson(const std::string& text,
                                                                                   int32_t num_experts) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("expert placement: invalid JSON");
  if (!j.contains("num_devices") || !j["num_devices"].is_number_integer() || !j.contains("slots_per_device") ||
      !j["slots_per_device"].is_number_integer() || !j.contains("layers") || !j["layers"].is_object())
    return absl::InvalidArgumentError("expert placement: needs integer num_devices, slots_per_device and a layers object");
  std::vector<std::pair<int32_t, ExpertPlacement>> out;
  for (auto it = j["layers"].begin(); it != j["layers"].end(); ++it) {
    ExpertPlacement p;
    p.num_experts = num_experts;
    p.num_devices = j["num_devices"];
    p.slots_per_device = j["slots_per_device"];
    int32_t layer = -1;
    try {
      layer = std::stoi(it.key());
      p.slot_expert = it.value().get<std::vector<int32_t>>();
    } catch (const std::exception&) {
      return absl::InvalidArgumentError(absl::StrCat("expert placement: layer '", it.key(), "' is malformed"));
    }
    p.Index();
    if (auto s = p.Validate(); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("expert placement, layer ", layer, ": ", s.message()));
    out.emplace_back(layer, std::move(p));
  }
  return out;
}

}  // namespace ls
