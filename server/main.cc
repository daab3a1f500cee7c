// latentserve: loads a model, starts the engine, and serves gRPC and the OpenAI-compatible HTTP
// API until SIGTERM/SIGINT, then drains: /ready turns false, intake stops, in-flight requests
// finish within --drain_timeout_s, exit 0. Every flag can also come from the environment as
// LATENTSERVE_<FLAG_NAME_IN_CAPITALS>; a flag on the command line wins. Launched by mpirun as
// several ranks, rank 0 serves as above for the whole group and the others run the workers' loop
// (dist/); a broken group ends the leader with status 3 after answering every request.
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/cli_usage.h"
#include "base/read_file.h"
#include "chat/chat_format.h"
#include "dist/rank_process.h"
#include "engine/calibration.h"
#include "engine/engine.h"
#include "engine/engine_calibration.h"
#include "engine/generation_defaults.h"
#include "kernels/create_backend.h"
#include "models/families/family.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "server/api_context.h"
#include "server/grouped_help.h"
#include "server/grpc_server.h"
#include "server/http_server.h"
#include "server/speculative_config.h"
#include "server/weight_budget.h"
#include "tokenizer/load_tokenizer.h"

ABSL_FLAG(std::string, model, "", "model directory: config.json, safetensors weights, tokenizer.json or tiktoken.model");
ABSL_FLAG(std::string, served_model_name, "", "model name in the API (default: the model directory's name)");
ABSL_FLAG(std::string, host, "0.0.0.0", "address to listen on (HTTP and gRPC)");
ABSL_FLAG(int32_t, http_port, 8000, "HTTP (OpenAI-compatible) port");
ABSL_FLAG(int32_t, grpc_port, 50051, "gRPC port");
ABSL_FLAG(std::string, backend, "cpu", "compute backend: cpu, or cuda in builds with the CUDA kernels");
ABSL_FLAG(int32_t, cuda_device, 0, "CUDA device index for --backend cuda");
ABSL_FLAG(int32_t, threads, 0, "CPU backend threads (0: one per hardware thread)");
ABSL_FLAG(
    std::string, activation_dtype, "auto",
    "GEMM activations: auto (cpu float32; cuda bfloat16, with FP8 block-scaled checkpoints' dense GEMMs in FP8 on "
    "Hopper), float32 (cpu), bfloat16 (cpu: the input rows of BF16 weights' GEMMs are rounded to bfloat16 and "
    "multiplied with AVX512-BF16 dot products, faster and less exact; cuda: every dense GEMM in BF16) or int8 (cpu: "
    "the input rows of int8 and int4 weights' GEMMs are rounded to int8, one scale per row, and "
    "multiplied in integers, as --quantization w8a8/w4a8 do)");
ABSL_FLAG(std::string, cpu_isa, "auto",
          "the widest instruction set the CPU kernels may use: auto (the best this CPU has, or the LS_CPU_ISA "
          "environment variable), or a target of kernels/cpu/simd/targets.def (portable, avx2, avx512_vnni, neon, ...; "
          "one this CPU lacks is refused, naming those it has); every choice gives the same results, at different "
          "speeds");
ABSL_FLAG(int32_t, http_threads, 2, "HTTP I/O threads");
ABSL_FLAG(int32_t, max_num_seqs, 64, "most sequences in one batch");
ABSL_FLAG(int32_t, max_num_batched_tokens, 2048, "most tokens computed in one step (prefill chunk budget)");
ABSL_FLAG(int32_t, kv_cache_mb, 512, "KV cache size in MiB (unless --gpu_memory_utilization sizes it)");
ABSL_FLAG(double, gpu_memory_utilization, 0,
          "cuda backend: the fraction of the GPU's memory this server may fill, the KV cache taking what the weights "
          "and the largest step leave of it (e.g. 0.9); 0: --kv_cache_mb sizes the cache");
ABSL_FLAG(int32_t, block_size, 16, "tokens per KV cache block");
ABSL_FLAG(std::string, quantization, "none",
          "online quantization of a float checkpoint's GEMM weights at load: none, int8, fp8, int4, w8a8 or w4a8 (a quantized "
          "checkpoint is served as stored)");
ABSL_FLAG(std::string, kv_cache_dtype, "auto",
          "KV cache elements: auto (bfloat16 for BF16 checkpoints; else float32), float32 or bfloat16");
ABSL_FLAG(bool, enable_prefix_caching, true, "share KV blocks of common prompt prefixes");
ABSL_FLAG(int32_t, state_cache_mb, -1,
          "models with recurrent (KDA) layers: MiB of the KV cache for the prefix cache's state snapshots "
          "(-1: a quarter of --kv_cache_mb; 0: no prefix caching for such models)");
ABSL_FLAG(int32_t, state_snapshot_interval, 512,
          "models with recurrent layers: a state snapshot every that many prompt tokens, a multiple of --block_size "
          "(0: only where a prompt leaves the cached prefixes and where it ends)");
ABSL_FLAG(std::string, speculative_config, "",
          "speculative decoding, as JSON: {\"method\": \"ngram\", \"num_speculative_tokens\": k, "
          "\"prompt_lookup_min\": n, \"prompt_lookup_max\": m} (prompt lookup) or {\"method\": \"draft_model\", "
          "\"model\": DIR, \"num_speculative_tokens\": k} (a smaller model with the same tokenizer) or "
          "{\"method\": \"mtp\", \"num_speculative_tokens\": k} (the checkpoint's multi-token-prediction layer: "
          "DeepSeek-V3, GLM-4-MoE)");
ABSL_FLAG(bool, warmup, true,
          "run the largest batch once at startup (full-size step buffers; too little memory fails at start)");
ABSL_FLAG(int32_t, max_model_len, 0, "context length limit, at most the model's max_position_embeddings (0: that)");
ABSL_FLAG(int32_t, max_waiting, 1024, "waiting-queue limit; requests beyond it get 429 / RESOURCE_EXHAUSTED");
ABSL_FLAG(int32_t, max_body_mb, 4, "largest HTTP request body in MiB (larger: 413)");
ABSL_FLAG(int32_t, max_connections, 10000,
          "HTTP connections served at once; one more is answered 503 and closed (keep it below the file limit)");
ABSL_FLAG(int32_t, http_header_timeout_s, 30,
          "close an HTTP connection whose request head is not complete this many seconds after it opened (or after "
          "the first byte of a later request)");
ABSL_FLAG(int32_t, http_keepalive_timeout_s, 60,
          "close a kept-alive HTTP connection that sends no new request for this many seconds");
ABSL_FLAG(std::string, api_key_file, "", "file of accepted API keys, one per line (empty: no authentication)");
ABSL_FLAG(std::string, allowed_origins, "",
          "web pages of these origins may call the HTTP API from a browser (CORS): a comma-separated list of "
          "http(s)://host[:port], or * for any (empty: none); never with credentials");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain for TLS on both ports (with --tls_key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for TLS (with --tls_cert)");
ABSL_FLAG(int32_t, responses_store_mb, 64,
          "MiB of Responses API responses kept for GET /v1/responses/{id} and previous_response_id (store: true, "
          "the default); past it the least recently used go first (0: keep none, and refuse store: true)");
ABSL_FLAG(int32_t, drain_timeout_s, 30, "on SIGTERM, seconds to let in-flight requests finish");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error");
ABSL_FLAG(int32_t, weight_budget_ranks, 0,
          "print the weights each GPU of a group of this many ranks would hold (with --tensor_parallel_size and "
          "--expert_slots), from the checkpoint's shapes alone (config.json and safetensors headers), and exit");
ABSL_FLAG(int32_t, tensor_parallel_size, 1,
          "in a rank group: consecutive ranks (on one host) that split attention heads, dense and shared-expert "
          "widths and the vocabulary, running the same batches; it divides the group's size (1: off)");
ABSL_FLAG(int32_t, devices, 0, "expert-parallel device workers (0: off); each holds only its experts' weights");
ABSL_FLAG(int32_t, expert_slots, 0, "expert slots per device (0: just enough to hold every expert once)");
ABSL_FLAG(std::string, expert_placement, "",
          "static expert placement JSON file (see docs), or \"auto\": planned at start from the expert load of "
          "--calibration_prompts (default: text the model samples itself); empty: uniform, then planned");
ABSL_FLAG(std::string, calibration_prompts, "",
          "with --expert_placement auto: text (one document per line) or token ids (.json, {\"sequences\": [[ids]]}) "
          "whose expert load plans the initial placement");
ABSL_FLAG(int32_t, calibration_max_tokens, ls::kCalibrationMaxTokens,
          "with --expert_placement auto: tokens the model writes after each calibration prompt (greedy; the "
          "prompts: --calibration_prompts, or the model's own samples), the set served as traffic is, so that "
          "every layer's plan comes from the rows it computes (the last layer's only from a prompt's last token and "
          "the written ones); 0: the prompts alone, every token through every layer");
ABSL_FLAG(int32_t, replan_interval, 0, "re-plan the expert placement every this many steps (0: never)");
ABSL_FLAG(double, replan_itl_budget_ms, 0,
          "with --replan_interval: copy a re-plan's new placement between steps, at most this many ms before any "
          "one step (at least one expert slot a step), and switch once it is complete; 0: build it in the background");
ABSL_FLAG(int32_t, load_window, 256, "engine steps of expert-load statistics the planner reads");
ABSL_FLAG(std::string, expert_load_dump, "", "on shutdown, write the recorded expert-load statistics to this JSON file");
ABSL_FLAG(std::string, expert_placement_dump, "", "on shutdown, write the expert placement in use (loadable with --expert_placement)");
ABSL_FLAG(int32_t, rank_timeout_s, 30,
          "rank group (launched by mpirun): seconds any one exchange between the ranks may take before the group "
          "counts as broken (the leader then answers every request with 503 and exits with status 3)");
ABSL_FLAG(int32_t, rank_start_timeout_s, 600, "rank group: seconds the ranks wait for each other at start-up");
ABSL_FLAG(int32_t, rank_heartbeat_ms, 1000, "rank group: heartbeat interval while idle (below --rank_timeout_s)");
ABSL_FLAG(std::string, chat_template, "",
          "Jinja chat template file replacing the model's (default: the model's own, else ChatML)");
ABSL_FLAG(std::string, chat_template_content_format, "auto",
          "how a message's list content (OpenAI parts) reaches the chat template: auto (as the template reads it: a "
          "template that loops over, indexes or list-filters a message's content gets the parts, others one string), "
          "string (the text parts joined with newlines) or openai (the parts as sent)");
ABSL_FLAG(std::string, tool_call_parser, "auto",
          "how tool calls are read from chat replies: auto (the model family's), none, hermes (or qwen), deepseek_v3, "
          "kimi_k2, glm45, xtml (Kimi K3)");
ABSL_FLAG(std::string, reasoning_parser, "auto",
          "how reasoning is split from chat replies: auto (think when the chat template writes </think>), none, think");
ABSL_FLAG(std::string, generation_config, "auto",
          "sampling defaults for fields a request leaves unset: auto (the model's generation_config.json), none, or "
          "a directory or file holding a generation_config.json");

namespace {

// --help: the flags by topic.
const std::vector<ls::server::FlagTopic>& FlagTopics() {
  static const std::vector<ls::server::FlagTopic> topics = {
      {"Model",
       {"model", "served_model_name", "backend", "cuda_device", "threads", "cpu_isa", "activation_dtype",
        "quantization", "max_model_len", "warmup"}},
      {"Network", {"host", "http_port", "grpc_port", "http_threads"}},
      {"Serving limits",
       {"max_num_seqs", "max_num_batched_tokens", "max_waiting", "max_body_mb", "max_connections",
        "http_header_timeout_s", "http_keepalive_timeout_s", "drain_timeout_s", "responses_store_mb",
        "speculative_config"}},
      {"Cache",
       {"kv_cache_mb", "gpu_memory_utilization", "kv_cache_dtype", "block_size", "enable_prefix_caching",
        "state_cache_mb", "state_snapshot_interval"}},
      {"Expert parallelism",
       {"devices", "expert_slots", "expert_placement", "calibration_prompts", "calibration_max_tokens",
        "replan_interval", "replan_itl_budget_ms", "load_window", "expert_load_dump", "expert_placement_dump"}},
      {"Rank group (several processes launched by mpirun)",
       {"tensor_parallel_size", "weight_budget_ranks", "rank_timeout_s", "rank_start_timeout_s", "rank_heartbeat_ms"}},
      {"Chat",
       {"chat_template", "chat_template_content_format", "tool_call_parser", "reasoning_parser", "generation_config"}},
      {"Security", {"api_key_file", "tls_cert", "tls_key", "allowed_origins"}},
      {"Logging", {"log_level"}},
  };
  return topics;
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "latentserve: %s\n", msg.c_str());
  return 1;
}

void RaiseFileLimit() {
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

using ls::server::LogLevel;

// Reads the flags: environment values first, so that the command line overrides them (every flag
// of this program, not Abseil's own, may come from LATENTSERVE_<NAME>). False after --help, which
// it prints.
bool ParseFlags(int argc, char** argv) {
  ls::ShowOwnFlagsInHelp();
  absl::SetProgramUsageMessage(
      "LatentServe: serves a Stable LatentMoE model over gRPC and an OpenAI-compatible HTTP API.\n"
      "  latentserve --model DIR [--http_port 8000] [--grpc_port 50051] ...\n"
      "Every flag can also be set as an environment variable LATENTSERVE_<NAME>, e.g. LATENTSERVE_HTTP_PORT.");
  if (ls::server::WantsHelp(argc, argv)) {
    std::fputs(ls::server::GroupedHelp(std::string(absl::ProgramUsageMessage()), FlagTopics()).c_str(), stdout);
    return false;
  }
  std::vector<std::string> args = {argv[0]};
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), "absl/")) continue;
    const std::string env = "LATENTSERVE_" + absl::AsciiStrToUpper(name);
    if (const char* v = std::getenv(env.c_str())) args.push_back(absl::StrCat("--", name, "=", v));
  }
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(cargs.size()), cargs.data());
  return true;
}

// The checks that need nothing loaded: the log level (returned), the model flag, ports and limits.
absl::StatusOr<LogLevel> CheckFlags() {
  const std::string level_name = absl::GetFlag(FLAGS_log_level);
  LogLevel level;
  if (level_name == "debug") level = LogLevel::kDebug;
  else if (level_name == "info") level = LogLevel::kInfo;
  else if (level_name == "warning") level = LogLevel::kWarning;
  else if (level_name == "error") level = LogLevel::kError;
  else return absl::InvalidArgumentError("--log_level must be debug, info, warning or error, got '" + level_name + "'");

  if (absl::GetFlag(FLAGS_model).empty()) return absl::InvalidArgumentError("--model is required (or LATENTSERVE_MODEL)");
  for (auto [name, v] : {std::pair<const char*, int32_t>{"http_port", absl::GetFlag(FLAGS_http_port)},
                         {"grpc_port", absl::GetFlag(FLAGS_grpc_port)}})
    if (v < 0 || v > 65535) return absl::InvalidArgumentError(absl::StrCat("--", name, " must be in [0, 65535], got ", v));
  for (auto [name, v] : {std::pair<const char*, int32_t>{"max_num_seqs", absl::GetFlag(FLAGS_max_num_seqs)},
                         {"max_num_batched_tokens", absl::GetFlag(FLAGS_max_num_batched_tokens)},
                         {"kv_cache_mb", absl::GetFlag(FLAGS_kv_cache_mb)},
                         {"block_size", absl::GetFlag(FLAGS_block_size)},
                         {"max_waiting", absl::GetFlag(FLAGS_max_waiting)},
                         {"max_body_mb", absl::GetFlag(FLAGS_max_body_mb)},
                         {"max_connections", absl::GetFlag(FLAGS_max_connections)},
                         {"http_header_timeout_s", absl::GetFlag(FLAGS_http_header_timeout_s)},
                         {"http_keepalive_timeout_s", absl::GetFlag(FLAGS_http_keepalive_timeout_s)},
                         {"http_threads", absl::GetFlag(FLAGS_http_threads)},
                         {"tensor_parallel_size", absl::GetFlag(FLAGS_tensor_parallel_size)},
                         {"rank_timeout_s", absl::GetFlag(FLAGS_rank_timeout_s)},
                         {"rank_start_timeout_s", absl::GetFlag(FLAGS_rank_start_timeout_s)},
                         {"rank_heartbeat_ms", absl::GetFlag(FLAGS_rank_heartbeat_ms)}})
    if (v < 1) return absl::InvalidArgumentError(absl::StrCat("--", name, " must be at least 1, got ", v));
  if (absl::GetFlag(FLAGS_drain_timeout_s) < 0) return absl::InvalidArgumentError("--drain_timeout_s must not be negative");
  if (absl::GetFlag(FLAGS_responses_store_mb) < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--responses_store_mb must not be negative, got ", absl::GetFlag(FLAGS_responses_store_mb)));
  if (absl::GetFlag(FLAGS_rank_heartbeat_ms) >= 1000 * absl::GetFlag(FLAGS_rank_timeout_s))
    return absl::InvalidArgumentError(
        "--rank_heartbeat_ms must be below --rank_timeout_s (a worker counts a silent leader as gone)");
  return level;
}

// The chat format (the model's template or --chat_template, with the parsers asked for); none
// for a model without a tokenizer.
absl::StatusOr<std::shared_ptr<const ls::chat::ChatFormat>> ChatFromFlags(const std::string& dir, const ls::Model& model,
                                                                         const ls::tok::Tokenizer* tokenizer) {
  if (!tokenizer) {
    if (!absl::GetFlag(FLAGS_chat_template).empty())
      return absl::InvalidArgumentError("--chat_template: this model has no tokenizer, so it has no chat");
    return std::shared_ptr<const ls::chat::ChatFormat>();
  }
  ls::chat::ChatFormatOptions chat_options;
  chat_options.model_dir = dir;
  chat_options.chat_template_file = absl::GetFlag(FLAGS_chat_template);
  chat_options.tool_call_parser = absl::GetFlag(FLAGS_tool_call_parser);
  chat_options.reasoning_parser = absl::GetFlag(FLAGS_reasoning_parser);
  chat_options.content_format = absl::GetFlag(FLAGS_chat_template_content_format);
  if (const ls::Family* family = ls::FindFamily(model.config().architecture, model.config().model_type)) {
    chat_options.family_tool_call_format = family->tool_call_format;
    chat_options.family_reasoning_format = family->reasoning_format;
  }
  chat_options.tokenizer = tokenizer;
  auto format = ls::chat::NewChatFormat(chat_options);
  if (!format.ok()) return format.status();
  return std::shared_ptr<const ls::chat::ChatFormat>(std::move(*format));
}

// The sampling defaults of --generation_config (none: empty).
absl::StatusOr<ls::GenerationDefaults> GenerationDefaultsFromFlags(const std::string& dir, int32_t vocab_size) {
  const std::string generation_config = absl::GetFlag(FLAGS_generation_config);
  if (generation_config == "none") return ls::GenerationDefaults();
  const std::string source = generation_config == "auto" ? dir : generation_config;
  auto d = std::filesystem::is_directory(source) ? ls::GenerationDefaults::FromModelDir(source)
                                                 : ls::GenerationDefaults::FromFile(source);
  if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat("--generation_config: ", d.status().message()));
  for (int32_t id : d->eos_token_ids)
    if (id >= vocab_size)
      return absl::InvalidArgumentError(
          absl::StrCat("--generation_config: eos_token_id ", id, " is outside the vocabulary"));
  return d;
}

// The engine's configuration (without the rank group's part).
// The draft model's directory, when --speculative_config names one, goes to *draft_model_dir; *mtp
// says whether it asks for the checkpoint's multi-token-prediction layer.
absl::StatusOr<ls::EngineConfig> EngineConfigFromFlags(std::string* draft_model_dir, bool* mtp, bool in_group) {
  ls::EngineConfig cfg;
  cfg.scheduler.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  cfg.scheduler.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  cfg.warmup = absl::GetFlag(FLAGS_warmup);
  cfg.kv_cache_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_kv_cache_mb)) << 20;
  cfg.gpu_memory_utilization = absl::GetFlag(FLAGS_gpu_memory_utilization);
  if (!(cfg.gpu_memory_utilization >= 0 && cfg.gpu_memory_utilization <= 1))
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu_memory_utilization must be in [0, 1] (0: off), got ", cfg.gpu_memory_utilization));
  cfg.block_size = absl::GetFlag(FLAGS_block_size);
  auto kv_dtype = ls::ParseKvCacheDType(absl::GetFlag(FLAGS_kv_cache_dtype));
  if (!kv_dtype.ok()) return absl::InvalidArgumentError("--" + std::string(kv_dtype.status().message()));
  cfg.kv_cache_dtype = *kv_dtype;
  cfg.enable_prefix_caching = absl::GetFlag(FLAGS_enable_prefix_caching);
  if (const int32_t mb = absl::GetFlag(FLAGS_state_cache_mb); mb < -1)
    return absl::InvalidArgumentError(
        absl::StrCat("--state_cache_mb must be -1 (a quarter of --kv_cache_mb) or at least 0, got ", mb));
  else if (mb >= 0)
    cfg.state_cache_bytes = static_cast<int64_t>(mb) << 20;
  cfg.state_snapshot_interval = absl::GetFlag(FLAGS_state_snapshot_interval);
  auto speculative = ls::server::ParseSpeculativeConfig(absl::GetFlag(FLAGS_speculative_config));
  if (!speculative.ok()) return speculative.status();
  cfg.speculative = speculative->config;
  *draft_model_dir = speculative->draft_model_dir;
  *mtp = speculative->mtp;
  cfg.max_waiting = absl::GetFlag(FLAGS_max_waiting);
  cfg.max_model_len = absl::GetFlag(FLAGS_max_model_len);
  cfg.experts.num_devices = absl::GetFlag(FLAGS_devices);
  cfg.experts.expert_slots = absl::GetFlag(FLAGS_expert_slots);
  cfg.experts.replan_interval = absl::GetFlag(FLAGS_replan_interval);
  cfg.experts.load_window = absl::GetFlag(FLAGS_load_window);
  if (cfg.experts.num_devices < 0 || cfg.experts.expert_slots < 0 || cfg.experts.replan_interval < 0)
    return absl::InvalidArgumentError("--devices, --expert_slots and --replan_interval must not be negative");
  cfg.experts.replan_step_budget_ms = absl::GetFlag(FLAGS_replan_itl_budget_ms);
  if (!std::isfinite(cfg.experts.replan_step_budget_ms) || cfg.experts.replan_step_budget_ms < 0)
    return absl::InvalidArgumentError(absl::StrCat("--replan_itl_budget_ms must be 0 or more milliseconds (got ",
                                                   cfg.experts.replan_step_budget_ms, ")"));
  if (cfg.experts.replan_step_budget_ms > 0 && cfg.experts.replan_interval == 0)
    return absl::InvalidArgumentError(
        "--replan_itl_budget_ms bounds how a re-plan is copied: it needs --replan_interval");
  const std::string placement = absl::GetFlag(FLAGS_expert_placement);
  if (!absl::GetFlag(FLAGS_calibration_prompts).empty() && placement != "auto")
    return absl::InvalidArgumentError("--calibration_prompts plans the placement of --expert_placement auto only");
  if (absl::GetFlag(FLAGS_calibration_max_tokens) < 0)
    return absl::InvalidArgumentError(absl::StrCat("--calibration_max_tokens must not be negative (got ",
                                                   absl::GetFlag(FLAGS_calibration_max_tokens), ")"));
  if (placement == "auto" && cfg.experts.num_devices == 0 && !in_group)  // a group places on its ranks
    return absl::InvalidArgumentError("--expert_placement auto needs --devices (the devices to place the experts on)");
  if (!placement.empty() && placement != "auto") {
    auto text = ls::ReadFile(placement);
    if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat("--expert_placement: ", text.status().message()));
    cfg.experts.placement_json = std::move(*text);
  }
  return cfg;
}

ls::server::HttpOptions HttpOptionsFromFlags() {
  ls::server::HttpOptions http_opt;
  http_opt.host = absl::GetFlag(FLAGS_host);
  http_opt.port = absl::GetFlag(FLAGS_http_port);
  http_opt.threads = absl::GetFlag(FLAGS_http_threads);
  http_opt.max_body_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_max_body_mb)) << 20;
  http_opt.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  http_opt.tls_key = absl::GetFlag(FLAGS_tls_key);
  http_opt.max_connections = absl::GetFlag(FLAGS_max_connections);
  http_opt.responses_store_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_responses_store_mb)) << 20;
  http_opt.header_timeout = std::chrono::seconds(absl::GetFlag(FLAGS_http_header_timeout_s));
  http_opt.keepalive_timeout = std::chrono::seconds(absl::GetFlag(FLAGS_http_keepalive_timeout_s));
  http_opt.allowed_origins = absl::GetFlag(FLAGS_allowed_origins);
  return http_opt;
}

// The model's name in the API: --served_model_name, else the model directory's name.
std::string ServedModelName(const std::string& dir) {
  std::string name = absl::GetFlag(FLAGS_served_model_name);
  if (name.empty()) name = std::filesystem::path(dir).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::path(dir).lexically_normal().parent_path().filename().string();
  return name;
}

// The start-up log's fields naming what a placement was planned from: --calibration_prompts's file
// (empty: the model's own samples), its sequences and tokens, and the tokens written after each
// (--calibration_max_tokens; none where `max_tokens` is negative).
std::string PlanSourceFields(const std::string& path, int64_t sequences, int64_t tokens, int32_t max_tokens) {
  return absl::StrCat("\"source\":",
                      nlohmann::json(path.empty() ? "model_samples" : path)
                          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                      ",\"sequences\":", sequences, ",\"tokens\":", tokens,
                      max_tokens < 0 ? "" : absl::StrCat(",\"max_tokens\":", max_tokens));
}

// The start-up log's field of the seconds since `start` (how long planning a placement took: a
// calibration set is served before the ready line).
std::string SecondsField(std::chrono::steady_clock::time_point start) {
  return absl::StrCat(",\"seconds\":", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// --expert_placement auto: the expert load of the calibration set (--calibration_prompts, or text
// the model samples itself) into experts->initial_loads. Returns what it ran on, as JSON fields for
// the start-up log.
absl::StatusOr<std::string> PlanInputsFromFlags(ls::Model& model, const ls::tok::Tokenizer* tokenizer,
                                                std::optional<ls::DType> kv_cache_dtype,
                                                ls::ExpertBalancerConfig* experts) {
  const std::string path = absl::GetFlag(FLAGS_calibration_prompts);
  absl::StatusOr<std::vector<std::vector<int32_t>>> seqs =
      path.empty() ? ls::SampleFromModel(model, ls::kCalibrationSamples, ls::kCalibrationSampleTokens, /*seed=*/1)
                   : ls::ReadCalibrationSet(path, tokenizer);
  if (!seqs.ok()) return absl::InvalidArgumentError(absl::StrCat("--calibration_prompts: ", seqs.status().message()));
  // The set's prompts or the model's samples, served as traffic is.
  const int32_t max_tokens = absl::GetFlag(FLAGS_calibration_max_tokens);
  if (max_tokens >= model.config().max_position_embeddings)
    return absl::InvalidArgumentError(absl::StrCat("--calibration_max_tokens ", max_tokens,
                                                   " leaves no room for a prompt in the model's context of ",
                                                   model.config().max_position_embeddings, " tokens"));
  auto loads = ls::MeasureServedExpertLoads(model, *seqs, max_tokens, kv_cache_dtype);
  if (!loads.ok()) return absl::InvalidArgumentError(absl::StrCat("--calibration_prompts: ", loads.status().message()));
  experts->initial_loads = std::move(*loads);
  int64_t tokens = 0;
  for (const auto& s : *seqs) tokens += static_cast<int64_t>(s.size());
  return PlanSourceFields(path, static_cast<int64_t>(seqs->size()), tokens, max_tokens);
}

// --expert_placement auto in a rank group: the calibration set (--calibration_prompts, or text the
// model samples itself) runs through the engine, which switches to the placement planned from its
// load. Returns the start-up log's fields: what it ran on and the plan's expected figures.
absl::StatusOr<std::string> PlanThroughEngineFromFlags(ls::Engine& engine, const ls::tok::Tokenizer* tokenizer) {
  ls::EngineCalibration c;
  const std::string path = absl::GetFlag(FLAGS_calibration_prompts);
  if (!path.empty()) {
    auto seqs = ls::ReadCalibrationSet(path, tokenizer);
    if (!seqs.ok()) return absl::InvalidArgumentError(absl::StrCat("--calibration_prompts: ", seqs.status().message()));
    c.prompts = std::move(*seqs);
  }
  c.max_tokens = absl::GetFlag(FLAGS_calibration_max_tokens);
  if (c.max_tokens >= engine.max_model_len())
    return absl::InvalidArgumentError(absl::StrCat("--calibration_max_tokens ", c.max_tokens,
                                                   " leaves no room for a prompt in the context of ",
                                                   engine.max_model_len(), " tokens"));
  auto r = ls::PlanPlacementThroughEngine(engine, c);
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("--expert_placement auto: ", r.status().message()));
  return absl::StrCat(PlanSourceFields(path, r->sequences, r->tokens, c.max_tokens),
                      ",\"expected_device_max_over_mean\":", r->expected_device_max_over_mean,
                      ",\"uniform_expected_device_max_over_mean\":", r->before_device_max_over_mean);
}

// How the engine speculates, for the ready line (null: it does not).
nlohmann::json SpeculativeFields(const ls::Engine& engine) {
  if (engine.num_speculative_tokens() == 0) return nullptr;
  nlohmann::json j{{"method", engine.speculative_method()},
                   {"num_speculative_tokens", engine.num_speculative_tokens()}};
  if (const ls::Model* draft = engine.draft_model(); draft && draft->is_next_token_layer()) {
    j["mtp_layer"] = draft->config().next_token_layer;  // the checkpoint's layer index
    j["draft_weight_mb"] = static_cast<double>(draft->prepared_weight_bytes()) / (1 << 20);
  } else if (draft) {
    j["draft_family"] = draft->config().family;
    j["draft_weight_mb"] = static_cast<double>(draft->weight_bytes()) / (1 << 20);
  }
  return j;
}

// What is serving, for the ready line.
nlohmann::json ReadyFields(const std::string& name, const ls::Model& model, ls::Engine& engine,
                           const ls::Backend& backend, const ls::BackendOptions& backend_options,
                           ls::dist::RankProcess* group, int http_port, int grpc_port, bool auth) {
  return {
      {"model", name},
      {"family", model.config().family},
      {"http_port", http_port},
      {"grpc_port", grpc_port},
      {"kv_blocks", engine.num_kv_blocks()},
      {"kv_cache_tokens", engine.kv_cache_tokens()},
      {"kv_cache_dtype", ls::KvCacheDTypeName(engine.kv_cache_dtype())},
      {"state_slots", engine.num_state_slots()},
      {"prefix_caching", engine.prefix_caching()},
      {"state_snapshot_slots", engine.num_snapshot_slots()},
      {"speculative", SpeculativeFields(engine)},
      {"state_cache_mb", static_cast<double>(engine.num_snapshot_slots() * engine.snapshot_slot_bytes()) / (1 << 20)},
      {"backend", std::string(backend.name())},
      {"activation_dtype", ls::ActivationDtypeName(backend_options)},
      {"cpu_isa", ls::CpuIsaName()},
      {"version", ls::kVersion},
      {"ranks", engine.num_ranks()},
      {"tensor_parallel_size", model.config().tensor_parallel.size},
      {"rank_checkpoint_mb", static_cast<double>(model.checkpoint_bytes_bound()) / (1 << 20)},
      {"pid", static_cast<int64_t>(getpid())},
      {"workers", nlohmann::json::parse(group ? group->workers_json() : "{}")},
      {"rank_expert_slot_bytes", engine.Metrics().rank_expert_bytes},
      {"rank_redundant_expert_slot_bytes", engine.Metrics().rank_redundant_expert_bytes},
      {"warmup_tokens", engine.warmup_tokens()},
      {"warmup_ms", static_cast<int64_t>(1e3 * engine.warmup_seconds())},
      {"auth", auth}};
}

// What the flags asked for and the model or the host does not allow, logged after the ready line.
void LogStartupWarnings(ls::server::ApiContext& ctx, const ls::Model& model, ls::Engine& engine,
                        const ls::EngineConfig& cfg) {
  if (rlimit rl; getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
                 static_cast<rlim_t>(absl::GetFlag(FLAGS_max_connections)) + 256 > rl.rlim_cur)
    ctx.Log(LogLevel::kWarning, "max_connections_near_file_limit",
            absl::StrCat("\"max_connections\":", absl::GetFlag(FLAGS_max_connections), ",\"file_limit\":",
                         static_cast<uint64_t>(rl.rlim_cur)));
  if (cfg.enable_prefix_caching && !engine.prefix_caching())
    ctx.Log(LogLevel::kWarning, "prefix_caching_disabled",
            absl::StrCat("\"reason\":\"--state_cache_mb leaves no room for one recurrent-state snapshot (",
                         (engine.snapshot_slot_bytes() + (1 << 20) - 1) >> 20, " MiB each)\""));
  if (const auto& unknown = model.config().unrecognized_keys; !unknown.empty())
    ctx.Log(LogLevel::kWarning, "config_keys_not_recognized",
            absl::StrCat("\"family\":\"", model.config().family, "\",\"keys\":", nlohmann::json(unknown).dump(),
                         ",\"note\":\"config.json keys the loader neither reads nor knows to be irrelevant; check "
                         "that none of them changes the model's math\""));
}

// Serves until SIGTERM or SIGINT (blocked in every thread), then drains and stops the front
// ends; a failed engine (a broken rank group, a step that threw) ends the process instead.
// Returns main's status.
int ServeUntilSignal(const sigset_t& stop_signals, ls::server::ApiContext& ctx, std::unique_ptr<ls::Engine>& engine,
                     ls::server::GrpcServer& grpc_server, ls::server::HttpServer& http_server,
                     ls::dist::RankProcess* group) {
  int sig = 0;
  sigwait(&stop_signals, &sig);
  if (engine->failed()) {
    // A rank died or stopped answering (every request answered with 503 / UNAVAILABLE), or a step
    // threw (500 / INTERNAL); /ready is false. Let the front ends write those answers, then end so
    // that the orchestrator restarts the server (the whole group).
    ctx.Log(LogLevel::kError, group ? "rank_group_failed" : "engine_failed",
            absl::StrCat("\"reason\":", nlohmann::json(std::string(engine->failure().message())).dump()));
    grpc_server.SetNotServing();
    http_server.Stop(std::chrono::seconds(5));
    grpc_server.Stop();
    ls::dist::ExitBrokenGroup(ls::dist::kGroupFailedExit);
  }
  ctx.Log(LogLevel::kInfo, "draining", absl::StrCat("\"signal\":", sig, ",\"in_flight\":", engine->num_live_requests()));
  grpc_server.SetNotServing();
  const bool clean = engine->Drain(std::chrono::seconds(absl::GetFlag(FLAGS_drain_timeout_s)));
  // The engine has produced every output; give the HTTP handlers the moments they need to write
  // them (gRPC's shutdown waits for its calls likewise).
  http_server.Stop(std::chrono::seconds(5));
  grpc_server.Stop();
  if (!absl::GetFlag(FLAGS_expert_load_dump).empty()) {
    std::ofstream out(absl::GetFlag(FLAGS_expert_load_dump));
    out << engine->ExpertLoadJson() << "\n";
    if (!out) ctx.Log(LogLevel::kError, "expert_load_dump_failed", "");
  }
  if (!absl::GetFlag(FLAGS_expert_placement_dump).empty()) {
    std::ofstream out(absl::GetFlag(FLAGS_expert_placement_dump));
    out << engine->PlacementJson() << "\n";
    if (!out) ctx.Log(LogLevel::kError, "expert_placement_dump_failed", "");
  }
  if (group) {  // the engine's loop ends first: only then may the group's last message go out
    engine.reset();
    group->Stop();
  }
  ctx.Log(LogLevel::kInfo, "stopped", absl::StrCat("\"drained\":", clean ? "true" : "false"));
  return 0;
}

// The stop signals, blocked in every thread (those started later inherit the mask); ServeUntilSignal
// waits for them. SIGPIPE is ignored: a client that hangs up is an error on its socket.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

ls::dist::RankTimeouts RankTimeoutsFromFlags() {
  ls::dist::RankTimeouts t;
  t.step = std::chrono::seconds(absl::GetFlag(FLAGS_rank_timeout_s));
  t.start = std::chrono::seconds(absl::GetFlag(FLAGS_rank_start_timeout_s));
  t.idle = std::chrono::milliseconds(absl::GetFlag(FLAGS_rank_heartbeat_ms));
  return t;
}

// What the server runs on, built in this order by LoadModelFromFlags and BuildEngineFromFlags;
// members are destroyed in reverse, so the engine goes before the draft model and the model it
// steps, and the backend last.
struct ServingStack {
  ls::BackendOptions backend_options;
  std::unique_ptr<ls::Backend> backend;
  std::unique_ptr<ls::Model> model;
  std::unique_ptr<ls::tok::Tokenizer> tokenizer;     // null: the model directory has none
  std::shared_ptr<const ls::chat::ChatFormat> chat;  // null: no chat
  ls::GenerationDefaults generation_defaults;
  ls::EngineConfig cfg;
  std::unique_ptr<ls::Model> draft_model;  // a draft model or the MTP layer; outlives the engine
  std::unique_ptr<ls::Engine> engine;
  std::string placement_plan;  // --expert_placement auto: the start-up log's fields (empty: none)
};

// The backend and the model (a rank's share of it, in a rank group, joined to its groups).
absl::Status LoadModelFromFlags(const std::string& dir, ls::dist::RankProcess* group, ServingStack* stack) {
  const int32_t local_rank = group ? group->local_rank() : 0;  // a node's ranks take its GPUs in turn
  std::string backend_error;
  stack->backend_options = {absl::GetFlag(FLAGS_backend), absl::GetFlag(FLAGS_threads),
                            absl::GetFlag(FLAGS_cuda_device) + local_rank, absl::GetFlag(FLAGS_activation_dtype),
                            absl::GetFlag(FLAGS_cpu_isa)};
  stack->backend = ls::CreateBackend(stack->backend_options, &backend_error);
  if (!stack->backend) return absl::InvalidArgumentError(backend_error);
  auto quantization = ls::ParseQuantScheme(absl::GetFlag(FLAGS_quantization));
  if (!quantization.ok()) return quantization.status();
  // A rank holds only the experts its devices are given: the others stay in the mapped checkpoint.
  ls::LoadOptions load;
  load.quantization = *quantization;
  load.routed_experts_on_host = group != nullptr;
  if (const int32_t tp = absl::GetFlag(FLAGS_tensor_parallel_size); tp != 1) {
    if (!group)
      return absl::InvalidArgumentError(
          absl::StrCat("--tensor_parallel_size ", tp,
                       " needs a rank group: launch a multiple of it ranks with mpirun (docs/deploy.md)"));
    if (auto s = group->FormTensorGroups(tp); !s.ok()) return s;
    load.tensor_parallel = group->tensor_parallel();
  }
  auto model = ls::LoadModel(dir, stack->backend.get(), load);
  if (!model.ok()) return model.status();
  stack->model = std::move(*model);
  // A rank's routed experts are prepared only when placed, so its model cannot count them yet.
  if (!group)
    if (auto s = ls::CheckActivationDtype(*stack->model, stack->backend_options.activation_dtype); !s.ok()) return s;
  if (group) {
    if (auto s = stack->model->JoinRankGroup(group->transport()); !s.ok()) return s;
    if (ls::RankTransport* tensor = group->tensor_group())
      if (auto s = stack->model->JoinTensorGroup(tensor); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The rest of the stack on the leader: tokenizer, chat format, generation defaults, the engine
// with its draft model, and the initial expert placement.
absl::Status BuildEngineFromFlags(const std::string& dir, ls::dist::RankProcess* group, ServingStack* stack) {
  if (std::filesystem::exists(dir + "/tokenizer.json") || std::filesystem::exists(dir + "/tiktoken.model")) {
    auto t = ls::tok::LoadTokenizer(dir);
    if (!t.ok()) return t.status();
    stack->tokenizer = std::move(*t);
  }
  auto chat = ChatFromFlags(dir, *stack->model, stack->tokenizer.get());
  if (!chat.ok()) return chat.status();
  stack->chat = std::move(*chat);
  auto generation_defaults = GenerationDefaultsFromFlags(dir, stack->model->config().vocab_size);
  if (!generation_defaults.ok()) return generation_defaults.status();
  stack->generation_defaults = std::move(*generation_defaults);
  std::string draft_dir;
  bool mtp = false;
  auto cfg = EngineConfigFromFlags(&draft_dir, &mtp, group != nullptr);
  if (!cfg.ok()) return cfg.status();
  stack->cfg = std::move(*cfg);
  // A rank group's model steps only with its ranks: its set runs through the engine once it is up.
  const bool auto_placement = absl::GetFlag(FLAGS_expert_placement) == "auto";
  if (auto_placement && !group) {
    const auto start = std::chrono::steady_clock::now();
    auto plan =
        PlanInputsFromFlags(*stack->model, stack->tokenizer.get(), stack->cfg.kv_cache_dtype, &stack->cfg.experts);
    if (!plan.ok()) return plan.status();
    stack->placement_plan = *plan + SecondsField(start);
  }
  if (!draft_dir.empty()) {
    auto draft = ls::server::LoadDraftModel(draft_dir, stack->backend.get(), *stack->model, stack->tokenizer.get());
    if (!draft.ok()) return draft.status();
    stack->draft_model = std::move(*draft);
  }
  if (mtp) {
    auto layer = ls::LoadModel(dir, stack->backend.get(), ls::LoadOptions{.next_token_layer = true});
    if (!layer.ok())
      return absl::Status(layer.status().code(),
                          absl::StrCat("--speculative_config method \"mtp\": ", layer.status().message()));
    stack->draft_model = std::move(*layer);
  }
  stack->cfg.speculative.draft_model = stack->draft_model.get();
  if (group) stack->cfg.ranks = group->leader_group(stack->model.get());
  // The engine failed for good (its group broke, or a step threw): it has answered every request;
  // main wakes up and ends the process.
  stack->cfg.on_failure = [](const absl::Status&) { kill(getpid(), SIGTERM); };
  auto engine = ls::Engine::Create(stack->model.get(), stack->tokenizer.get(), stack->cfg);
  if (!engine.ok()) return engine.status();
  stack->engine = std::move(*engine);
  if (auto_placement && group) {
    const auto start = std::chrono::steady_clock::now();
    auto plan = PlanThroughEngineFromFlags(*stack->engine, stack->tokenizer.get());
    if (!plan.ok()) return plan.status();
    stack->placement_plan = *plan + SecondsField(start);
  }
  return absl::OkStatus();
}

// --weight_budget_ranks: prints the per-rank weight budget of the model as JSON instead of serving.
int PrintWeightBudget(const std::string& dir) {
  std::string error;
  std::unique_ptr<ls::Backend> cpu = ls::CreateBackend(ls::BackendOptions{"cpu", 1}, &error);
  if (!cpu) return Fail(error);
  auto budget =
      ls::server::WeightBudgetJson(dir, cpu.get(), absl::GetFlag(FLAGS_weight_budget_ranks),
                                   absl::GetFlag(FLAGS_tensor_parallel_size), absl::GetFlag(FLAGS_expert_slots));
  if (!budget.ok()) return Fail(std::string(budget.status().message()));
  std::printf("%s\n", budget->c_str());
  return 0;
}

// --api_key_file's keys (none: no authentication).
absl::StatusOr<ls::server::ApiKeys> ApiKeysFromFlags() {
  if (absl::GetFlag(FLAGS_api_key_file).empty()) return ls::server::ApiKeys();
  return ls::server::ApiKeys::LoadFile(absl::GetFlag(FLAGS_api_key_file));
}

// The start-up log: the chat format and generation defaults, then "ready" (which tells a watcher
// the start-up log is complete), the expert placement's plan and the warnings.
void LogStartup(ls::server::ApiContext& ctx, const ServingStack& stack, const std::string& name,
                ls::dist::RankProcess* group, int http_port, int grpc_port) {
  if (stack.chat) ctx.Log(LogLevel::kInfo, "chat_format", stack.chat->Describe());
  ctx.Log(LogLevel::kInfo, "generation_config",
          absl::StrCat("\"source\":", nlohmann::json(absl::GetFlag(FLAGS_generation_config)).dump(), ",\"defaults\":{",
                       stack.generation_defaults.Describe(), "}"));
  const std::string ready = ReadyFields(name, *stack.model, *stack.engine, *stack.backend, stack.backend_options, group,
                                        http_port, grpc_port, ctx.keys().enabled())
                                .dump();
  ctx.Log(LogLevel::kInfo, "ready", ready.substr(1, ready.size() - 2));
  if (!stack.placement_plan.empty()) {
    const ls::MetricsSnapshot m = stack.engine->Metrics();
    ctx.Log(LogLevel::kInfo, "expert_placement_plan",
            group ? stack.placement_plan  // its figures are the switch's
                  : absl::StrCat(stack.placement_plan,
                                 ",\"expected_device_max_over_mean\":", m.planned_device_max_over_mean,
                                 ",\"uniform_expected_device_max_over_mean\":", m.uniform_device_max_over_mean));
  }
  LogStartupWarnings(ctx, *stack.model, *stack.engine, stack.cfg);
}

}  // namespace

int main(int argc, char** argv) {
  if (!ParseFlags(argc, argv)) return 0;
  const auto level = CheckFlags();
  if (!level.ok()) return Fail(std::string(level.status().message()));
  const std::string dir = absl::GetFlag(FLAGS_model);
  if (absl::GetFlag(FLAGS_weight_budget_ranks) > 0) return PrintWeightBudget(dir);
  auto keys = ApiKeysFromFlags();
  if (!keys.ok()) return Fail(std::string(keys.status().message()));
  const sigset_t stop_signals = BlockStopSignals();
  RaiseFileLimit();

  // Launched by mpirun as one of several ranks: join the group (rank 0 leads, the others work).
  auto joined = ls::dist::RankProcess::JoinIfLaunched(RankTimeoutsFromFlags());
  if (!joined.ok()) return Fail(std::string(joined.status().message()));
  ls::dist::RankProcess* group = joined->get();
  // Once in a group, a failure ends the process without finalizing MPI (the peers may be gone).
  auto fail = [&](absl::string_view msg) {
    Fail(std::string(msg));
    if (group) ls::dist::ExitBrokenGroup(1);
    return 1;
  };

  ServingStack stack;
  if (auto s = LoadModelFromFlags(dir, group, &stack); !s.ok()) return fail(s.message());
  if (group && group->rank() != 0) {  // a worker rank: the workers' loop, until the group stops
    const int status = group->RunWorker(stack.model.get());
    if (status != 0) ls::dist::ExitBrokenGroup(status);
    return 0;
  }
  if (auto s = BuildEngineFromFlags(dir, group, &stack); !s.ok()) return fail(s.message());

  // The front ends.
  const std::string name = ServedModelName(dir);
  ls::server::ApiContext ctx(stack.engine.get(), stack.tokenizer.get(), stack.chat, name,
                             std::string(stack.backend->name()), std::move(*keys), *level, stack.generation_defaults);
  ls::server::GrpcServer grpc_server({absl::GetFlag(FLAGS_host), absl::GetFlag(FLAGS_grpc_port),
                                      absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key)},
                                     &ctx);
  ls::server::HttpServer http_server(HttpOptionsFromFlags(), &ctx);
  // HTTP first: it checks --host and the TLS files itself and names what is wrong, where gRPC
  // reports only that it cannot listen.
  if (auto s = http_server.Start(); !s.ok()) return fail(s.message());
  if (auto s = grpc_server.Start(); !s.ok()) return fail(s.message());
  LogStartup(ctx, stack, name, group, http_server.port(), grpc_server.port());

  return ServeUntilSignal(stop_signals, ctx, stack.engine, grpc_server, http_server, group);
}
