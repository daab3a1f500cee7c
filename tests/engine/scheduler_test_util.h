// Sequences and step bookkeeping that the scheduler tests build their scenarios from.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/scheduler.h"

namespace ls::test {

// A waiting prompt of prompt_len tokens (token_base, token_base + 1, ...).
inline std::unique_ptr<Sequence> Seq(int32_t prompt_len, uint64_t arrival, int32_t priority = 0,
                                     int32_t token_base = 0) {
  auto s = std::make_unique<Sequence>();
  s->arrival = arrival;
  s->priority = priority;
  for (int32_t i = 0; i < prompt_len; ++i) s->tokens.push_back(token_base + i);
  s->num_prompt_tokens = prompt_len;
  return s;
}

// Runs the plan's bookkeeping as the engine would: computed counts, then a token for samplers.
inline void Complete(Scheduler& sch, const SchedulerPlan& plan, int32_t next_token = 7) {
  sch.OnStepDone(plan);
  for (const auto& it : plan.items)
    if (it.sample) it.seq->tokens.push_back(next_token);
}

}  // namespace ls::test
