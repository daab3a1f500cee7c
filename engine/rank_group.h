// RankGroup: the processes (ranks) an engine's model steps run on. The engine's scheduler gives
// every sequence to one rank, which keeps its KV cache and runs its attention (data-parallel
// attention); each step runs on every rank at once over that rank's sequences, the MoE layers
// exchanging rows between them (expert parallelism), and the logits come back to the engine,
// which samples. LocalRankGroup is this process alone; dist/ implements a group of processes over
// MPI, where this process is rank 0 and sends each step's plan, never activations, to the others.
// Called from the engine's loop thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "kernels/dtype.h"
#include "models/expert_placement.h"
#include "models/kv_cache.h"
#include "models/step_batch.h"

namespace ls {

// The KV cache every rank makes for its own sequences (the same on every rank).
struct RankCacheSpec {
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t num_state_slots = 0;
  DType dtype = DType::kF32;
};

// Memory one rank holds for its placed experts (its devices' slots).
struct RankExpertMemory {
  int64_t slot_bytes = 0;       // every slot's copy
  int64_t redundant_bytes = 0;  // the copies that replicate an expert held elsewhere too
};

using LayerPlacements = std::vector<std::pair<int32_t, ExpertPlacement>>;

class RankGroup {
 public:
  virtual ~RankGroup() = default;
  // The ranks the engine schedules sequences over: each has its own batch and KV cache. Under
  // tensor parallelism such a rank is a tensor-parallel group of processes running one batch.
  virtual int32_t size() const = 0;
  // The processes the experts are placed over (every process of every tensor-parallel group).
  virtual int32_t num_processes() const { return size(); }

  // Before the first step: every other rank makes a KV cache of `cache` and installs `placements`
  // (the expert placement this process installed on its own model; empty: none) as epoch 0.
  virtual absl::Status Start(const RankCacheSpec& cache, const LayerPlacements& placements) = 0;
  // Runs batches[r] on rank r — batches[0] on this process's model and `cache` — and returns
  // rank r's logits rows in (*logits)[r] ([rows, vocab], in its batch's sequence order), and
  // where `hidden` is set its final hidden rows in (*hidden)[r] ([tokens, d], Model::CaptureHidden:
  // what an MTP proposer reads).
  // An Unavailable error means the group is broken (a rank died, failed or stopped answering
  // within the deadline): no further step can run. Other errors are the step's own.
  virtual absl::Status Step(const std::vector<StepBatch>& batches, KvCache& cache,
                            std::vector<std::vector<float>>* logits, std::vector<std::vector<float>>* hidden) = 0;
  // Nothing to run: how long the engine may stay idle, and the call it makes then, which lets the
  // ranks see that they are all alive (a heartbeat); Unavailable as for Step.
  virtual std::chrono::milliseconds idle_interval() const = 0;
  virtual absl::Status Idle() = 0;

  // Expert placement across the ranks (docs/serving.md, docs/rank-groups.md): the engine hands a new placement to the
  // other ranks, which build their share of it in the background; once every rank has
  // (PlacementBuilt), SwitchPlacement makes them all use it from the next step on, the same step
  // on which this process switches its own model.
  virtual void PreparePlacement(int64_t epoch, const LayerPlacements& placements) = 0;
  virtual bool PlacementBuilt(int64_t epoch) const = 0;
  virtual void SwitchPlacement(int64_t epoch) = 0;
  // What the newest placement each process has built holds ([num_processes()]; entry 0, this
  // process's own, is the caller's to fill).
  virtual std::vector<RankExpertMemory> BuiltMemory() const = 0;

  // The orderly end: the other ranks leave their loops and exit. Nothing may be called after it.
  virtual void Stop() = 0;
};

}  // namespace ls
