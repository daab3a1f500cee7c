// ExpertPlacement validation and dispatch.
#include "models/expert_placement.h"

#include "absl/strings/str_cat.h"

namespace ls {

void ExpertPlacement::Index() {
  replicas.assign(num_experts, {});
  for (int32_t s = 0; s < static_cast<int32_t>(slot_expert.size()); ++s)
    if (slot_expert[s] >= 0 && slot_expert[s] < num_experts) replicas[slot_expert[s]].push_back(s);
}

absl::Status ExpertPlacement::Validate() const {
  if (num_devices < 1 || slots_per_device < 1) return absl::InvalidArgumentError("devices and slots must be positive");
  if (static_cast<int64_t>(slot_expert.size()) != static_cast<int64_t>(num_devices) * slots_per_device)
    return absl::InvalidArgumentError(absl::StrCat("placement has ", slot_expert.size(), " slots, expected ",
                                                   num_devices * slots_per_device));
  std::vector<int32_t> count(num_experts, 0);
  for (int32_t d = 0; d < num_devices; ++d) {
    std::vector<bool> seen(num_experts, false);
    for (int32_t s = 0; s < slots_per_device; ++s) {
      const int32_t e = slot_expert[d * slots_per_device + s];
      if (e < -1 || e >= num_experts) return absl::InvalidArgumentError(absl::StrCat("slot holds expert ", e, " out of range"));
      if (e < 0) continue;
      if (seen[e]) return absl::InvalidArgumentError(absl::StrCat("expert ", e, " has two copies on device ", d));
      seen[e] = true;
      ++count[e];
    }
  }
  for (int32_t e = 0; e < num_experts; ++e)
    if (count[e] == 0) return absl::InvalidArgumentError(absl::StrCat("expert ", e, " is not placed"));
  return absl::OkStatus();
}

std::vector<int32_t> DispatchSlots(const ExpertPlacement& p, const int32_t* ids, int64_t num_pairs) {
  std::vector<int32_t> out(num_pairs, -1);
  std::vector<int64_t> rows(p.num_devices, 0);
  // A row of an expert with one copy has one place to go.
  for (int64_t i = 0; i < num_pairs; ++i) {
    const auto& reps = p.replicas[ids[i]];
    if (reps.size() == 1) ++rows[p.device_of(out[i] = reps[0])];
  }
  // A row of a replicated expert, in pair order, goes to the copy whose device has the fewest rows
  // so far; between equal devices, to the copy after the one the expert's previous row took.
  std::vector<int32_t> next(p.num_experts, 0);
  for (int64_t i = 0; i < num_pairs; ++i) {
    const auto& reps = p.replicas[ids[i]];
    if (reps.size() == 1) continue;
    const int32_t n = static_cast<int32_t>(reps.size()), first = next[ids[i]] % n;
    int32_t best = first;
    for (int32_t j = 1; j < n; ++j) {
      const int32_t c = (first + j) % n;
      if (rows[p.device_of(reps[c])] < rows[p.device_of(reps[best])]) best = c;
    }
    ++rows[p.device_of(out[i] = reps[best])];
    next[ids[i]] = best + 1;
  }
  return out;
}

}  // namespace ls
