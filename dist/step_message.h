// StepMessage and WorkerReply: what rank 0 (the leader) sends every rank whenever the group acts
// together — start, a step, an idle heartbeat, stop — and what each worker sends back. A step's
// message is its plan for the receiving rank: its batch (token ids, positions, KV block tables and
// state slots in its own cache) and any expert-placement change; activations never travel in it.
// A reply
// carries the rank's logits rows (and its final hidden rows when asked), the expert counts it recorded since its
// previous reply and the state of its placements. Plain data with a byte encoding; decoding checks every length and
// value and names what is wrong. No MPI here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/rank_group.h"

namespace ls::dist {

enum class StepKind : uint8_t {
  kStart = 1,  // make the cache, install the initial placement
  kStep = 2,   // run the batch
  kIdle = 3,   // nothing to run: a heartbeat (placement changes may ride on it)
  kStop = 4,   // leave the loop and exit
};

struct PlacementUpdate {
  int64_t epoch = 0;
  LayerPlacements layers;
};

struct StepMessage {
  StepKind kind = StepKind::kIdle;
  RankCacheSpec cache;                     // kStart
  StepBatch batch;                         // kStep: the receiving rank's
  std::optional<PlacementUpdate> prepare;  // kStart: the initial placement; else one to build in the background
  int64_t switch_epoch = -1;               // >= 0: use that (built) placement from this message on
  bool want_hidden = false;                // kStep: reply with the final hidden rows too (an MTP proposer's)
  // kStep: reply with the logits (and hidden rows); false for a tensor-parallel group's processes
  // after its first, whose results are the same.
  bool want_logits = true;
};

struct WorkerReply {
  std::string error;                   // this rank's failure (the group stops); empty when fine
  std::vector<float> logits;           // kStep: [rows, vocab] in its batch's sequence order
  std::vector<float> hidden;           // kStep, when asked: [tokens, d] the final hidden rows
  std::vector<int64_t> expert_tokens;  // [layers * N] tokens it routed since its previous reply
  std::vector<int64_t> device_rows;    // [layers * D] rows it sent to each device since then
  int64_t built_epoch = -1;            // its newest placement built and ready to switch to
  RankExpertMemory built_memory;       // what that placement holds on this rank
  double exchange_seconds = 0;         // time in the MoE exchanges during this step
  int64_t pid = 0;                     // kStart: the process and its host, for operators
  std::string host;
};

std::string Encode(const StepMessage& m);
absl::StatusOr<StepMessage> DecodeStepMessage(std::string_view bytes);
std::string Encode(const WorkerReply& r);
absl::StatusOr<WorkerReply> DecodeWorkerReply(std::string_view bytes);

}  // namespace ls::dist
