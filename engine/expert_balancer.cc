// ExpertBalancer: placement set-up, load statistics, background re-planning and the switch.
#include "engine/expert_balancer.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/expert_planner.h"

namespace ls {

using Clock = std::chrono::steady_clock;

absl::StatusOr<std::unique_ptr<ExpertBalancer>> ExpertBalancer::Create(Model* model, const ExpertBalancerConfig& given,
                                                                       EngineMetrics* metrics, RankGroup* group) {
  ExpertBalancerConfig config = given;
  if (config.load_window < 1) return absl::InvalidArgumentError("load_window must be at least 1");
  const ModelConfig& mc = model->config();
  const int32_t ranks = group->num_processes();
  // Several ranks always place their experts: one device per rank unless told otherwise.
  if (ranks > 1 && config.num_devices == 0 && config.placement_json.empty()) config.num_devices = ranks;
  if (ranks > 1 && config.num_devices % ranks != 0)
    return absl::InvalidArgumentError(absl::StrCat("--devices ", config.num_devices, " does not split over the ", ranks,
                                                   " ranks of the group (each rank holds devices/ranks)"));
  model->SetPlacedExperts(nullptr);
  std::unique_ptr<ExpertBalancer> b(new ExpertBalancer(model, config, metrics, group));
  if (config.num_devices > 0 || !config.placement_json.empty()) {
    if (b->moe_layers_.empty())
      return absl::InvalidArgumentError(ranks > 1 ? "a rank group places experts over its ranks, and this model has "
                                                    "no MoE layers"
                                                  : "expert parallelism needs a model with MoE layers, and this one "
                                                    "has none");
    std::vector<std::pair<int32_t, ExpertPlacement>> placements;
    if (!config.placement_json.empty()) {
      auto loaded = PlacementsFromJson(config.placement_json, mc.moe.num_experts);
      if (!loaded.ok()) return loaded.status();
      placements = std::move(*loaded);
      if (!placements.empty() && config.num_devices > 0 && placements[0].second.num_devices != config.num_devices)
        return absl::InvalidArgumentError(absl::StrCat("the expert placement file is for ",
                                                       placements[0].second.num_devices, " devices, but ",
                                                       config.num_devices, " were asked for"));
    } else {
      const int32_t D = config.num_devices;
      const int32_t S = config.expert_slots > 0 ? config.expert_slots : (mc.moe.num_experts + D - 1) / D;
      // Planned from the expected loads where given (each measured against the uniform placement).
      auto plan = PlanFromLoads(config.initial_loads, mc.moe.num_experts, D, S);
      if (!plan.ok()) return plan.status();
      for (int32_t l : b->moe_layers_) {
        auto planned =
            std::find_if(plan->placements.begin(), plan->placements.end(), [l](const auto& p) { return p.first == l; });
        if (planned != plan->placements.end()) {
          placements.push_back(std::move(*planned));
          continue;
        }
        auto p = UniformPlacement(mc.moe.num_experts, D, S);
        if (!p.ok()) return p.status();
        placements.emplace_back(l, std::move(*p));
      }
      if (!plan->placements.empty())
        metrics->Update([&](MetricsSnapshot& m) {
          m.planned_device_max_over_mean = plan->expected_device_max_over_mean;
          m.uniform_device_max_over_mean = plan->uniform_device_max_over_mean;
        });
    }
    auto placed = model->BuildPlacedExperts(placements);
    if (!placed.ok()) return placed.status();
    model->SetPlacedExperts(std::move(*placed));
    b->InstallMetrics(*model->placed_experts(), nullptr);
  }
  if (config.replan_interval > 0 && !model->placed_experts())
    return absl::InvalidArgumentError("re-planning needs expert parallelism (num_devices >= 1)");
  if (config.replan_step_budget_ms < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("the re-plan step budget must not be negative (got ", config.replan_step_budget_ms, " ms)"));
  if (config.replan_step_budget_ms > 0 && config.replan_interval <= 0)
    return absl::InvalidArgumentError("a re-plan step budget needs re-planning (a replan interval of 1 or more)");
  if (config.replan_step_budget_ms > 0 && ranks > 1)
    return absl::InvalidArgumentError(
        "a re-plan step budget is for one process: a rank group's ranks build a new placement in the background "
        "and switch together");
  return b;
}

ExpertBalancer::ExpertBalancer(Model* model, const ExpertBalancerConfig& config, EngineMetrics* metrics,
                               RankGroup* group)
    : model_(model),
      group_(group),
      config_(config),
      metrics_(metrics),
      window_(model->config().num_hidden_layers, model->config().moe.num_experts, config.load_window),
      step_end_unix_(config.load_window, 0.0),
      last_counts_(model->expert_token_counts()) {
  for (int32_t l = 0; l < model->config().num_hidden_layers; ++l)
    if (model->config().is_moe_layer(l)) moe_layers_.push_back(l);
}

ExpertBalancer::~ExpertBalancer() {
  if (planner_.joinable()) planner_.join();
}

void ExpertBalancer::InstallMetrics(const PlacedExperts& placed, const ReplanEvent* replan) {
  const int32_t layers = model_->config().num_hidden_layers;
  metrics_->Update([&](MetricsSnapshot& m) {
    m.num_devices = placed.num_devices();
    m.slots_per_device = placed.slots_per_device();
    m.replica_map.assign(layers, {});
    for (int32_t l = 0; l < layers; ++l)
      if (const PlacedLayer* pl = placed.layer(l)) m.replica_map[l] = pl->placement.slot_expert;
    const int32_t processes = group_->num_processes();
    m.rank_expert_bytes.assign(processes, 0);
    m.rank_redundant_expert_bytes.assign(processes, 0);
    const std::vector<RankExpertMemory> built = group_->BuiltMemory();
    for (int32_t r = 1; r < processes && r < static_cast<int32_t>(built.size()); ++r) {
      m.rank_expert_bytes[r] = built[r].slot_bytes;
      m.rank_redundant_expert_bytes[r] = built[r].redundant_bytes;
    }
    m.rank_expert_bytes[0] = static_cast<int64_t>(placed.rank_bytes());
    m.rank_redundant_expert_bytes[0] = static_cast<int64_t>(placed.redundant_bytes());
    if (replan) {
      ++m.replans;
      m.replan_seconds_total += replan->plan_seconds;
      m.last_replan_seconds = replan->plan_seconds;
      ReplanEvent e = *replan;
      e.step = m.steps;
      if (e.chunks == 0) m.migration_seconds_total += e.migration_seconds;  // chunks add theirs as they run
      for (int64_t b : m.rank_expert_bytes) e.copied_bytes += b;
      m.migration_bytes_total += e.copied_bytes;
      m.moved_slots_total += e.moved_slots;
      if (m.replan_events.size() == MetricsSnapshot::kMaxReplanEvents) m.replan_events.erase(m.replan_events.begin());
      m.replan_events.push_back(e);
    }
  });
}

void ExpertBalancer::ResetLoad() {
  model_->ResetExpertTokenCounts();
  model_->ResetDeviceRowCounts();
  last_counts_ = model_->expert_token_counts();
}

namespace {

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void ExpertBalancer::RecordStepLoad() {
  const std::vector<int64_t>& now = model_->expert_token_counts();
  {
    MutexLock lock(&window_mu_);
    window_.AddStepDifference(now, last_counts_);
    step_end_unix_[next_step_slot_] = UnixSeconds();
    next_step_slot_ = (next_step_slot_ + 1) % config_.load_window;
  }
  last_counts_ = now;  // same size: copies without allocating
}

void ExpertBalancer::AfterStep() {
  if (config_.replan_interval <= 0 || planning_.load()) return;
  if (++steps_since_replan_ < config_.replan_interval) return;
  clear_window_on_switch_ = false;
  StartPlan();
}

void ExpertBalancer::ClearWindow() {
  ResetLoad();
  MutexLock lock(&window_mu_);
  window_ = ExpertLoadWindow(model_->config().num_hidden_layers, model_->config().moe.num_experts, config_.load_window);
  next_step_slot_ = 0;
}

void ExpertBalancer::StartPlan() {
  steps_since_replan_ = 0;
  std::vector<std::pair<int32_t, std::vector<double>>> loads;
  {
    MutexLock lock(&window_mu_);
    for (int32_t l : moe_layers_) loads.emplace_back(l, window_.LayerLoads(l));
  }
  std::shared_ptr<const PlacedExperts> current = model_->placed_experts();
  const int32_t D = current->num_devices(), S = current->slots_per_device();
  if (planner_.joinable()) planner_.join();
  planning_ = true;
  // Plan (and, without a step budget, copy the new replicas' weights) off the loop thread; the
  // switch waits for a step boundary.
  planner_ = std::thread([this, loads = std::move(loads), current = std::move(current), D, S] {
    const auto t0 = Clock::now();
    std::vector<std::pair<int32_t, ExpertPlacement>> before, placements;
    for (const auto& [l, v] : loads) before.emplace_back(l, current->layer(l)->placement);
    for (const auto& [l, v] : loads) {
      auto p = PlanPlacement(v, D, S);
      if (!p.ok()) {
        planning_ = false;
        return;
      }
      placements.emplace_back(l, std::move(*p));
    }
    ReplanEvent event;
    event.device_max_over_mean_before = MeanExpectedDeviceMaxOverMean(loads, before);
    event.device_max_over_mean_after = MeanExpectedDeviceMaxOverMean(loads, placements);
    for (size_t i = 0; i < placements.size(); ++i)
      for (size_t s = 0; s < placements[i].second.slot_expert.size(); ++s)
        event.moved_slots += placements[i].second.slot_expert[s] != before[i].second.slot_expert[s];
    if (config_.replan_step_budget_ms > 0) {  // buffers allocated here; the loop copies, a chunk before each step
      auto build = model_->StartPlacedExpertsBuild(placements);
      if (!build.ok()) {
        planning_ = false;
        return;
      }
      event.plan_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      MutexLock lock(&pending_mu_);
      pending_build_ = std::move(*build);
      pending_event_ = event;
      return;
    }
    const auto t1 = Clock::now();
    auto placed = model_->BuildPlacedExperts(placements);
    if (!placed.ok()) {
      planning_ = false;
      return;
    }
    event.migration_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
    event.plan_seconds = std::max(std::chrono::duration<double>(Clock::now() - t0).count(), 1e-9);
    MutexLock lock(&pending_mu_);
    pending_ = std::move(*placed);
    pending_layers_ = std::move(placements);
    pending_event_ = event;
  });
}

void ExpertBalancer::MigrateChunk() {
  const auto t0 = Clock::now();
  if (!migration_) {
    MutexLock lock(&pending_mu_);
    if (!pending_build_) return;
    migration_ = std::move(pending_build_);
    migration_event_ = pending_event_;
  }
  // Slots until the budget would be passed by one more, at the mean time per slot of this
  // migration so far; at least one.
  const double budget = config_.replan_step_budget_ms / 1e3;
  MigrationChunk chunk;
  double elapsed = 0;
  do {
    chunk.bytes += static_cast<int64_t>(migration_->CopyNextSlot());
    ++chunk.slots;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (!migration_->done() &&
           elapsed + (migration_event_.migration_seconds + elapsed) / static_cast<double>(migration_->slots_copied()) <=
               budget);
  chunk.seconds = elapsed;
  chunk.unix_seconds = UnixSeconds();
  ++migration_event_.chunks;
  migration_event_.migration_seconds += elapsed;
  migration_event_.max_chunk_seconds = std::max(migration_event_.max_chunk_seconds, elapsed);
  metrics_->Update([&](MetricsSnapshot& m) {
    chunk.step = m.steps;
    m.migration_seconds_total += elapsed;
    m.max_migration_chunk_seconds = std::max(m.max_migration_chunk_seconds, elapsed);
    ++m.migration_chunks_total;
    if (m.migration_chunks.size() == MetricsSnapshot::kMaxMigrationChunks)
      m.migration_chunks.erase(m.migration_chunks.begin());
    m.migration_chunks.push_back(chunk);
  });
  if (!migration_->done()) return;
  std::shared_ptr<const PlacedExperts> placed = migration_->Finish();
  migration_.reset();
  model_->SetPlacedExperts(placed);
  migration_event_.plan_seconds += migration_event_.migration_seconds;  // planning and copying, as in the background
  migration_event_.unix_seconds = UnixSeconds();
  InstallMetrics(*placed, &migration_event_);
  switch_step_ = true;
  planning_ = false;
  if (clear_window_on_switch_) {
    clear_window_on_switch_ = false;
    ClearWindow();
  }
}

std::chrono::milliseconds ExpertBalancer::IdleWait(std::chrono::milliseconds idle) const {
  // A plan asked for (RequestReplan) switches in at a pass of the loop: an idle one passes often
  // until it has. (A periodic re-plan waits for the next step, as it always has.)
  if (config_.replan_step_budget_ms <= 0)
    return replan_requested_.load() || (planning_.load() && clear_window_on_switch_)
               ? std::min(idle, std::chrono::milliseconds(5))
               : idle;
  if (migration_) return std::chrono::milliseconds(0);
  return planning_.load() ? std::min(idle, std::chrono::milliseconds(5)) : idle;
}

void ExpertBalancer::BeforeStep() {
  if (clear_requested_.exchange(false)) ClearWindow();
  if (replan_requested_.load() && !planning_.load() && model_->placed_experts()) {
    replan_requested_ = false;
    clear_window_on_switch_ = true;
    StartPlan();
  }
  if (config_.replan_step_budget_ms > 0) return MigrateChunk();
  if (!announced_) {
    LayerPlacements layers;
    {
      MutexLock lock(&pending_mu_);
      announced_ = std::move(pending_);
      layers = std::move(pending_layers_);
      announced_event_ = pending_event_;
    }
    if (!announced_) return;
    group_->PreparePlacement(++epoch_, layers);  // the other ranks build their share meanwhile
  }
  if (!group_->PlacementBuilt(epoch_)) return;
  // Every rank has it: all switch before the same step.
  group_->SwitchPlacement(epoch_);
  model_->SetPlacedExperts(announced_);
  announced_event_.unix_seconds = UnixSeconds();
  InstallMetrics(*announced_, &announced_event_);
  announced_.reset();
  switch_step_ = true;
  planning_ = false;
  if (clear_window_on_switch_) {
    clear_window_on_switch_ = false;
    ClearWindow();
  }
}

LayerPlacements ExpertBalancer::Placements() const {
  LayerPlacements layers;
  if (const auto& placed = model_->placed_experts())
    for (int32_t l : moe_layers_)
      if (const PlacedLayer* pl = placed->layer(l)) layers.emplace_back(l, pl->placement);
  return layers;
}

void ExpertBalancer::UpdateRankMemory() {
  if (const auto& placed = model_->placed_experts()) InstallMetrics(*placed, nullptr);
}

bool ExpertBalancer::TakeSwitching() {
  const bool switching = planning_.load() || switch_step_;
  switch_step_ = false;
  return switching;
}

std::string ExpertBalancer::PlacementJson() const {
  if (!model_->placed_experts()) return "";
  return PlacementsToJson(Placements());
}

ExpertLoadWindowSnapshot ExpertBalancer::WindowSnapshot() const {
  ExpertLoadWindowSnapshot w;
  MutexLock lock(&window_mu_);
  w.capacity = config_.load_window;
  w.num_experts = window_.num_experts();
  w.moe_layers = moe_layers_;
  w.tokens.reserve(moe_layers_.size() * static_cast<size_t>(w.num_experts));
  w.steps = window_.steps();
  if (w.steps > 0) {
    const int32_t W = config_.load_window;
    w.last_step_unix_seconds = step_end_unix_[(next_step_slot_ + W - 1) % W];
    w.first_step_unix_seconds = step_end_unix_[(next_step_slot_ + W - w.steps) % W];
  }
  const std::vector<int64_t>& totals = window_.totals();
  for (int32_t l : moe_layers_) {
    const auto b = totals.begin() + static_cast<size_t>(l) * w.num_experts;
    w.tokens.insert(w.tokens.end(), b, b + w.num_experts);
  }
  return w;
}

std::string ExpertBalancer::ExpertLoadJson() const {
  MutexLock lock(&window_mu_);
  std::string out = absl::StrCat("{\"window_steps\": ", window_.steps(), ", \"layers\": {");
  for (size_t i = 0; i < moe_layers_.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", "\"", moe_layers_[i], "\": [");
    const auto v = window_.LayerLoads(moe_layers_[i]);
    for (size_t e = 0; e < v.size(); ++e) absl::StrAppend(&out, e ? ", " : "", static_cast<int64_t>(v[e]));
    out += "]";
  }
  return out + "}}";
}

}  // namespace ls
