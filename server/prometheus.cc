// Prometheus text format (version 0.0.4).
#include "server/prometheus.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/version.h"
#include "engine/expert_planner.h"

namespace ls::server {
namespace {

void Header(std::string* out, const char* name, const char* type, const char* help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void Histo(std::string* out, const char* name, const char* help, const Histogram& h) {
  Header(out, name, "histogram", help);
  uint64_t cum = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cum += h.counts[i];
    absl::StrAppendFormat(out, "%s_bucket{le=\"%g\"} %d\n", name, h.bounds[i], cum);
  }
  cum += h.counts.back();
  absl::StrAppendFormat(out, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %.6f\n%s_count %d\n", name, cum, name, h.sum, name,
                        h.count);
}

void Value(std::string* out, const char* name, const char* type, const char* help, double v) {
  Header(out, name, type, help);
  absl::StrAppendFormat(out, "%s %.17g\n", name, v);
}

}  // namespace

std::vector<std::pair<int32_t, double>> ExpertLoadMaxOverMean(const MetricsSnapshot& m) {
  std::vector<std::pair<int32_t, double>> r;
  if (m.num_experts <= 0) return r;
  for (int32_t l : m.moe_layers) {
    const auto b = m.expert_tokens.begin() + static_cast<size_t>(l) * m.num_experts;
    if (m.expert_tokens.size() < static_cast<size_t>(l + 1) * m.num_experts) break;
    int64_t sum = 0, mx = 0;
    for (auto it = b; it != b + m.num_experts; ++it) {
      sum += *it;
      mx = std::max(mx, *it);
    }
    r.emplace_back(l, sum > 0 ? static_cast<double>(mx) * m.num_experts / static_cast<double>(sum) : 0.0);
  }
  return r;
}

std::string RenderPrometheus(const ApiContext& ctx, const ResponseStore* responses) {
  const MetricsSnapshot m = ctx.engine().Metrics();
  std::string out;
  // Prometheus's convention for what is running: a constant 1 whose labels say it.
  Header(&out, "latentserve_build_info", "gauge", "The release serving (label version), always 1.");
  absl::StrAppendFormat(&out, "latentserve_build_info{version=\"%s\"} 1\n", kVersion);
  Header(&out, "latentserve_requests_total", "counter", "Finished front-end requests by API and status.");
  for (const auto& [key, n] : ctx.request_counts())
    absl::StrAppendFormat(&out, "latentserve_requests_total{api=\"%s\",status=\"%s\"} %d\n", key.first, key.second, n);
  Header(&out, "latentserve_engine_requests_finished_total", "counter", "Engine requests finished, by reason.");
  const char* reasons[4] = {"stop", "length", "cancelled", "error"};
  for (int i = 0; i < 4; ++i)
    absl::StrAppendFormat(&out, "latentserve_engine_requests_finished_total{reason=\"%s\"} %d\n", reasons[i], m.finished[i]);
  Value(&out, "latentserve_engine_requests_rejected_total", "counter", "Requests refused at submission.", m.rejected);
  Value(&out, "latentserve_prompt_tokens_total", "counter", "Prompt tokens admitted.", m.prompt_tokens);
  Value(&out, "latentserve_generation_tokens_total", "counter", "Tokens generated.", m.generation_tokens);
  Value(&out, "latentserve_preemptions_total", "counter", "Sequences preempted for lack of KV blocks.", m.preemptions);
  Value(&out, "latentserve_engine_steps_total", "counter", "Model steps run.", m.steps);
  Value(&out, "latentserve_num_requests_running", "gauge", "Sequences in the running batch.", m.running);
  Value(&out, "latentserve_num_requests_waiting", "gauge", "Sequences waiting to be scheduled.", m.waiting);
  Value(&out, "latentserve_kv_cache_blocks_used", "gauge", "KV cache blocks in use.", m.kv_blocks_used);
  Value(&out, "latentserve_kv_cache_blocks_total", "gauge", "KV cache blocks in all.", m.kv_blocks_total);
  if (m.state_slots_total > 0) {
    Value(&out, "latentserve_state_slots_used", "gauge", "Recurrent-state slots held by running sequences.",
          m.state_slots_used);
    Value(&out, "latentserve_state_slots_total", "gauge", "Recurrent-state slots (one per running sequence).",
          m.state_slots_total);
  }
  Value(&out, "latentserve_kv_cache_capacity_tokens", "gauge",
        "Tokens the KV cache holds in all (blocks times tokens per block; per-layer widths as each attention kind "
        "caches).",
        static_cast<int64_t>(m.kv_blocks_total) * m.kv_block_size);
  Value(&out, "latentserve_kv_cache_usage_ratio", "gauge", "Fraction of KV cache blocks in use.",
        m.kv_blocks_total ? static_cast<double>(m.kv_blocks_used) / m.kv_blocks_total : 0.0);
  Value(&out, "latentserve_prefix_cache_queries_tokens_total", "counter", "Prompt tokens looked up in the prefix cache.",
        m.prefix_queried_tokens);
  Value(&out, "latentserve_prefix_cache_hits_tokens_total", "counter", "Prompt tokens found in the prefix cache.",
        m.prefix_hit_tokens);
  Value(&out, "latentserve_prefix_cache_hits_total", "counter",
        "Requests that found part of their prompt in the prefix cache.", static_cast<int64_t>(m.prefix_hit_requests));
  if (m.snapshot_slots_total > 0) {
    Value(&out, "latentserve_state_snapshots", "gauge",
          "Recurrent-state snapshots the prefix cache holds (models with linear-attention layers).", m.snapshots_held);
    Value(&out, "latentserve_state_snapshot_bytes", "gauge", "Memory those snapshots take.",
          m.snapshots_held * m.snapshot_slot_bytes);
    Value(&out, "latentserve_state_snapshot_capacity_bytes", "gauge", "Memory set aside for snapshots.",
          m.snapshot_slots_total * m.snapshot_slot_bytes);
    Value(&out, "latentserve_state_snapshots_taken_total", "counter", "Recurrent-state snapshots taken.",
          m.snapshots_taken);
    Value(&out, "latentserve_state_snapshot_evictions_total", "counter",
          "Snapshots evicted (least recently used, or to give back their KV block).", m.snapshot_evictions);
  }
  if (!m.spec_method.empty()) {
    // Labelled by method, as one server speculates one way.
    const std::string label = absl::StrCat("{method=\"", m.spec_method, "\"}");
    auto labelled = [&](const char* name, const char* type, const char* help, double v) {
      Header(&out, name, type, help);
      absl::StrAppendFormat(&out, "%s%s %.17g\n", name, label, v);
    };
    labelled("latentserve_spec_decode_num_drafts_total", "counter",
             "Speculative decoding: sequence steps that verified a draft.", static_cast<double>(m.spec_steps));
    labelled("latentserve_spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed.",
             static_cast<double>(m.spec_draft_tokens));
    labelled("latentserve_spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.",
             static_cast<double>(m.spec_accepted_tokens));
    labelled("latentserve_spec_decode_acceptance_rate", "gauge", "Draft tokens accepted per draft token proposed.",
             m.spec_draft_tokens > 0 ? static_cast<double>(m.spec_accepted_tokens) / m.spec_draft_tokens : 0.0);
    labelled("latentserve_spec_decode_mean_accepted_length", "gauge",
             "Tokens a verifying step emits on average: 1 + draft tokens accepted per step.",
             m.spec_steps > 0 ? 1.0 + static_cast<double>(m.spec_accepted_tokens) / m.spec_steps : 0.0);
    labelled("latentserve_spec_decode_propose_seconds_total", "counter", "Time spent proposing drafts.",
             m.spec_propose_seconds);
    labelled("latentserve_spec_decode_propose_errors_total", "counter",
             "Proposer failures (each leaves that step without drafts).", static_cast<double>(m.spec_propose_errors));
  }
  Value(&out, "latentserve_structured_output_tokens_total", "counter",
        "Tokens sampled under a structured-output grammar.", static_cast<int64_t>(m.grammar_tokens));
  Value(&out, "latentserve_structured_output_mask_seconds_total", "counter",
        "Time spent masking logits with grammars and advancing their matchers.", m.grammar_seconds);
  Histo(&out, "latentserve_queue_time_seconds", "Arrival to first scheduling.", m.queue_time);
  Histo(&out, "latentserve_time_to_first_token_seconds", "Arrival to first generated token.", m.ttft);
  Histo(&out, "latentserve_inter_token_latency_seconds", "Time between consecutive tokens of a request.", m.inter_token);
  Histo(&out, "latentserve_e2e_request_latency_seconds", "Arrival to finish.", m.e2e);
  Histo(&out, "latentserve_tokens_per_step", "Tokens computed per model step.", m.tokens_per_step);
  Header(&out, "latentserve_expert_load_max_over_mean", "gauge",
         "Per MoE layer, tokens of the busiest expert divided by the mean over experts.");
  for (const auto& [layer, ratio] : ExpertLoadMaxOverMean(m))
    absl::StrAppendFormat(&out, "latentserve_expert_load_max_over_mean{layer=\"%d\"} %.6f\n", layer, ratio);
  const ExpertLoadWindowSnapshot w = ctx.engine().ExpertWindow();
  Header(&out, "latentserve_expert_load_window_max_over_mean", "gauge",
         "Per MoE layer, over the load window (--load_window steps): tokens of the busiest expert divided by the "
         "mean over experts.");
  for (size_t i = 0; i < w.moe_layers.size(); ++i) {
    const auto b = w.tokens.begin() + static_cast<ptrdiff_t>(i * w.num_experts);
    absl::StrAppendFormat(&out, "latentserve_expert_load_window_max_over_mean{layer=\"%d\"} %.6f\n", w.moe_layers[i],
                          MaxOverMean(std::vector<double>(b, b + w.num_experts)));
  }
  Value(&out, "latentserve_expert_load_window_steps", "gauge", "Engine steps the expert load window holds.", w.steps);
  if (m.num_devices > 0) {
    Value(&out, "latentserve_expert_parallel_devices", "gauge", "Expert-parallel device workers.", m.num_devices);
    Header(&out, "latentserve_device_load_max_over_mean", "gauge",
           "Per MoE layer, routed rows of the busiest device divided by the mean over devices (since the last switch).");
    for (int32_t l : m.moe_layers) {
      if (m.device_rows.size() < static_cast<size_t>(l + 1) * m.num_devices) break;
      std::vector<double> rows(m.device_rows.begin() + static_cast<size_t>(l) * m.num_devices,
                               m.device_rows.begin() + static_cast<size_t>(l + 1) * m.num_devices);
      absl::StrAppendFormat(&out, "latentserve_device_load_max_over_mean{layer=\"%d\"} %.6f\n", l, MaxOverMean(rows));
    }
    Value(&out, "latentserve_expert_replans_total", "counter", "Placement re-plans switched in.", m.replans);
    Value(&out, "latentserve_expert_replan_seconds_total", "counter", "Time spent planning and copying replicas.",
          m.replan_seconds_total);
    Value(&out, "latentserve_expert_replan_last_seconds", "gauge", "Duration of the last re-plan.", m.last_replan_seconds);
    Value(&out, "latentserve_expert_migration_bytes_total", "counter",
          "Bytes copied to build the placements switched in (every rank's devices).",
          static_cast<double>(m.migration_bytes_total));
    Value(&out, "latentserve_expert_migration_seconds_total", "counter",
          "Time spent copying experts for new placements (between steps under --replan_itl_budget_ms, else in the "
          "background).",
          m.migration_seconds_total);
    Value(&out, "latentserve_expert_migration_chunks_total", "counter",
          "Chunks of expert slots copied between steps under --replan_itl_budget_ms.",
          static_cast<double>(m.migration_chunks_total));
    Value(&out, "latentserve_expert_migration_step_delay_max_seconds", "gauge",
          "Longest time one migration chunk added before a step (under --replan_itl_budget_ms).",
          m.max_migration_chunk_seconds);
    Value(&out, "latentserve_expert_moved_slots_total", "counter",
          "Expert slots whose expert a switched-in placement changed.", static_cast<double>(m.moved_slots_total));
    Value(&out, "latentserve_expert_switch_longest_step_seconds", "gauge",
          "Longest engine step while a re-plan was in flight or being switched in.", m.longest_switch_step_seconds);
    Header(&out, "latentserve_rank_expert_slot_bytes", "gauge",
           "Per rank of the group, memory holding its placed experts (all its devices' slots).");
    for (size_t r = 0; r < m.rank_expert_bytes.size(); ++r)
      absl::StrAppendFormat(&out, "latentserve_rank_expert_slot_bytes{rank=\"%d\"} %d\n", r, m.rank_expert_bytes[r]);
    Header(&out, "latentserve_rank_redundant_expert_slot_bytes", "gauge",
           "Per rank, the part of that memory in redundant copies (replicas of hot experts beyond their first slot).");
    for (size_t r = 0; r < m.rank_redundant_expert_bytes.size(); ++r)
      absl::StrAppendFormat(&out, "latentserve_rank_redundant_expert_slot_bytes{rank=\"%d\"} %d\n", r,
                            m.rank_redundant_expert_bytes[r]);
  }
  Value(&out, "latentserve_ranks", "gauge", "Processes of the rank group serving the model (1: this one alone).",
        m.num_ranks);
  const HttpConnectionCounters& hc = ctx.http_connections();
  Value(&out, "latentserve_http_connections_open", "gauge", "HTTP connections being served.", hc.open.load());
  Value(&out, "latentserve_http_connections_total", "counter", "HTTP connections accepted and served.",
        hc.accepted.load());
  Header(&out, "latentserve_http_connections_closed_total", "counter",
         "HTTP connections the server closed on a timeout: request head incomplete (header_timeout), or kept alive "
         "without a new request (idle_timeout).");
  absl::StrAppendFormat(&out, "latentserve_http_connections_closed_total{reason=\"header_timeout\"} %d\n",
                        hc.header_timeouts.load());
  absl::StrAppendFormat(&out, "latentserve_http_connections_closed_total{reason=\"idle_timeout\"} %d\n",
                        hc.idle_timeouts.load());
  Value(&out, "latentserve_http_connections_rejected_total", "counter",
        "HTTP connections answered 503 and closed because --max_connections were open.", hc.rejected.load());
  Value(&out, "latentserve_handler_failures_total", "counter",
        "Requests a fault of the server's own cut short: an exception out of an HTTP or gRPC handler (logged as "
        "http_handler_failed or grpc_handler_failed). Bad input never counts here.",
        static_cast<double>(ctx.handler_failures()));
  Value(&out, "latentserve_ready", "gauge", "1 when the server accepts requests.", ctx.ready() ? 1 : 0);
  if (responses && responses->enabled()) {
    Value(&out, "latentserve_responses_stored", "gauge", "Responses API responses kept for retrieval and chaining.",
          static_cast<double>(responses->size()));
    Value(&out, "latentserve_responses_store_bytes", "gauge", "Bytes the stored responses take (--responses_store_mb).",
          static_cast<double>(responses->bytes()));
    Value(&out, "latentserve_responses_dropped_total", "counter",
          "Stored responses dropped for room, least recently used first (a steady rise: raise --responses_store_mb).",
          static_cast<double>(responses->dropped()));
  }
  return out;
}

}  // namespace ls::server
