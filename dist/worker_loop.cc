// WorkerLoop: message in, its work, reply out, until the leader stops the group or it fails.
#include "dist/worker_loop.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace ls::dist {

WorkerLoop::WorkerLoop(Model* model, Communicator* comm, RankTimeouts timeouts)
    : model_(model), comm_(comm), timeouts_(timeouts) {}

WorkerLoop::~WorkerLoop() {
  if (builder_.joinable()) builder_.join();
}

void WorkerLoop::Log(const std::string& event, const std::string& fields) const {
  const double ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string line = absl::StrFormat("{\"ts\":%.3f,\"level\":\"%s\",\"event\":\"%s\",\"rank\":%d", ts,
                                     event == "rank_group_failed" ? "error" : "info", event, comm_->rank());
  if (!fields.empty()) absl::StrAppend(&line, ",", fields);
  line += "}\n";
  std::fputs(line.c_str(), stderr);
}

int WorkerLoop::Run() {
  comm_->set_timeout(timeouts_.start);  // the leader may still be loading its model
  for (;;) {
    std::string bytes;
    if (!comm_->ScatterBytes({}, &bytes)) break;
    comm_->set_timeout(timeouts_.step);
    auto message = DecodeStepMessage(bytes);
    WorkerReply reply;
    if (message.ok()) {
      reply = Handle(*message);
    } else {
      reply.error = std::string(message.status().message());
    }
    if (!comm_->GatherBytes(Encode(reply), nullptr) || !comm_->ok()) break;
    if (!reply.error.empty()) {
      Log("rank_group_failed", absl::StrCat("\"reason\":", nlohmann::json(reply.error).dump()));
      return kGroupFailedExit;
    }
    if (message->kind == StepKind::kStop) return 0;
  }
  Log("rank_group_failed", absl::StrCat("\"reason\":", nlohmann::json(comm_->error()).dump()));
  return kGroupFailedExit;
}

WorkerReply WorkerLoop::Handle(StepMessage& m) {
  WorkerReply reply;
  switch (m.kind) {
    case StepKind::kStart: {
      const RankCacheSpec& c = m.cache;
      cache_ = std::make_unique<KvCache>(model_->backend(), model_->kv_layout(), c.num_blocks, c.block_size, c.dtype,
                                         c.num_state_slots);
      if (m.prepare) {
        auto placed = model_->BuildPlacedExperts(m.prepare->layers);
        if (!placed.ok()) {
          reply.error = absl::StrCat("the initial expert placement: ", placed.status().message());
          break;
        }
        MutexLock lock(&built_mu_);
        model_->SetPlacedExperts(*placed);
        built_epoch_ = m.prepare->epoch;
      }
      reply.pid = static_cast<int64_t>(::getpid());
      reply.host = comm_->host();
      Log("rank_ready", absl::StrCat("\"pid\":", reply.pid, ",\"host\":", nlohmann::json(reply.host).dump(),
                                     ",\"kv_blocks\":", c.num_blocks));
      break;
    }
    case StepKind::kStep:
    case StepKind::kIdle: {
      if (m.prepare) BeginBuild(std::move(*m.prepare));
      if (m.switch_epoch >= 0) {
        if (absl::Status st = SwitchTo(m.switch_epoch); !st.ok()) {
          reply.error = std::string(st.message());
          break;
        }
      }
      if (m.kind == StepKind::kIdle) break;
      if (!cache_) {
        reply.error = "a step before the start";
        break;
      }
      comm_->TakeExchangeSeconds();
      model_->CaptureHidden(m.want_hidden && m.want_logits ? &reply.hidden : nullptr);
      const absl::Status st = model_->Forward(m.batch, *cache_, &logits_);
      model_->CaptureHidden(nullptr);
      if (!st.ok()) {
        reply.error = absl::StrCat("its share of the step failed: ", st.message());
        break;
      }
      reply.exchange_seconds = comm_->TakeExchangeSeconds();
      if (m.want_logits) {
        reply.logits = std::move(logits_);
        logits_ = {};
      }
      break;
    }
    case StepKind::kStop:
      break;
  }
  TakeCounts(&reply);
  MutexLock lock(&built_mu_);
  reply.built_epoch = built_epoch_;
  if (const auto& placed = built_ ? built_ : model_->placed_experts()) {
    reply.built_memory.slot_bytes = static_cast<int64_t>(placed->rank_bytes());
    reply.built_memory.redundant_bytes = static_cast<int64_t>(placed->redundant_bytes());
  }
  if (!build_error_.empty() && reply.error.empty()) reply.error = build_error_;
  return reply;
}

void WorkerLoop::BeginBuild(PlacementUpdate update) {
  if (builder_.joinable()) builder_.join();
  {
    MutexLock lock(&built_mu_);
    building_epoch_ = update.epoch;
  }
  // Copying this rank's experts into their new slots runs beside the steps; the leader switches
  // the group once every rank reports it built.
  builder_ = std::thread([this, update = std::move(update)] {
    auto placed = model_->BuildPlacedExperts(update.layers);
    MutexLock lock(&built_mu_);
    if (!placed.ok()) {
      build_error_ = absl::StrCat("building expert placement ", update.epoch, ": ", placed.status().message());
      return;
    }
    built_ = std::move(*placed);
    built_epoch_ = update.epoch;
  });
}

absl::Status WorkerLoop::SwitchTo(int64_t epoch) {
  bool wait = false;
  {
    MutexLock lock(&built_mu_);
    wait = building_epoch_ == epoch && built_epoch_ < epoch;
  }
  if (wait && builder_.joinable()) builder_.join();
  MutexLock lock(&built_mu_);
  if (built_epoch_ != epoch || !built_)
    return absl::InternalError(absl::StrCat("told to switch to expert placement ", epoch,
                                            ", which this rank has not built (its newest: ", built_epoch_, ")"));
  model_->SetPlacedExperts(std::move(built_));
  built_.reset();
  sent_rows_.assign(model_->device_row_counts().size(), 0);  // the model's row counts restart at zero
  return absl::OkStatus();
}

void WorkerLoop::TakeCounts(WorkerReply* reply) {
  const std::vector<int64_t>& tokens = model_->expert_token_counts();
  const std::vector<int64_t>& rows = model_->device_row_counts();
  if (sent_tokens_.size() != tokens.size()) sent_tokens_.assign(tokens.size(), 0);
  if (sent_rows_.size() != rows.size()) sent_rows_.assign(rows.size(), 0);
  reply->expert_tokens.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) reply->expert_tokens[i] = tokens[i] - sent_tokens_[i];
  reply->device_rows.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) reply->device_rows[i] = rows[i] - sent_rows_[i];
  sent_tokens_ = tokens;
  sent_rows_ = rows;
}

}  // namespace ls::dist
