// latentserve-bench: a load generator for LatentServe and any OpenAI-compatible server. Closed
// loop (N concurrent clients) or open loop (Poisson arrivals at a rate, or a sweep of rates);
// synthetic or JSONL prompts; stops after a request count or a duration; prints a live progress
// line, a table, and --json FILE.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "base/cli_usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tools/bench/client.h"

ABSL_FLAG(std::string, backend, "http", "http (OpenAI-compatible) or grpc (LatentServe)");
ABSL_FLAG(std::string, target, "127.0.0.1:8000", "HOST:PORT of the server");
ABSL_FLAG(std::string, endpoint, "completions", "HTTP endpoint: completions or chat");
ABSL_FLAG(std::string, model, "", "model name sent in HTTP requests (empty: omitted)");
ABSL_FLAG(std::string, api_key, "", "bearer key (or LATENTSERVE_API_KEY)");
ABSL_FLAG(int32_t, concurrency, 1, "closed loop: concurrent clients; open loop: most requests in flight");
ABSL_FLAG(std::string, request_rate, "", "open loop: Poisson arrivals per second; a comma list sweeps rates");
ABSL_FLAG(int64_t, num_requests, 100, "requests to send (per rate)");
ABSL_FLAG(double, duration, 0, "stop sending after this many seconds (0: no limit)");
ABSL_FLAG(std::string, dataset, "", "JSONL prompts; empty: synthetic");
ABSL_FLAG(int32_t, input_len, 128, "synthetic prompt length (tokens)");
ABSL_FLAG(int32_t, output_len, 64, "synthetic output length (max_tokens)");
ABSL_FLAG(double, range_ratio, 0.0, "synthetic lengths uniform within ±ratio of the mean");
ABSL_FLAG(int32_t, vocab, 4000, "synthetic token ids are drawn from [10, vocab)");
ABSL_FLAG(bool, ignore_eos, true, "ask for exactly max_tokens tokens");
ABSL_FLAG(int32_t, warmup, 2, "requests sent (and discarded) before measuring");
ABSL_FLAG(uint64_t, seed, 0, "seed for synthetic prompts and arrivals");
ABSL_FLAG(double, slo_ttft_ms, 1000, "goodput SLO: time to first token (ms)");
ABSL_FLAG(double, slo_tpot_ms, 200, "goodput SLO: time per output token (ms)");
ABSL_FLAG(std::string, json, "", "write the results as JSON to this file");
ABSL_FLAG(bool, progress, true, "live progress line on stderr");

namespace {

using Clock = std::chrono::steady_clock;
using namespace ls::bench;

int Fail(const std::string& m) {
  std::fprintf(stderr, "latentserve-bench: %s\n", m.c_str());
  return 2;
}

struct RunResult {
  double rate;  // 0: closed loop
  Summary summary;
};

// Runs the workload once: closed loop when rate == 0, else Poisson arrivals.
RunResult RunOnce(Client& client, const std::vector<BenchRequest>& work, double rate) {
  const int64_t n = static_cast<int64_t>(work.size());
  const int32_t conc = absl::GetFlag(FLAGS_concurrency);
  const double limit = absl::GetFlag(FLAGS_duration);
  std::vector<RequestRecord> records;
  std::mutex mu;
  std::atomic<int64_t> next{0}, done{0}, failed{0}, tokens{0};
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  auto run_one = [&](int64_t i) {
    RequestRecord r = client.Send(work[i], t0);
    done.fetch_add(1);
    if (!r.error.empty()) failed.fetch_add(1);
    tokens.fetch_add(r.output_tokens);
    std::lock_guard<std::mutex> lock(mu);
    records.push_back(std::move(r));
  };
  std::atomic<bool> finished{false};
  std::thread progress([&] {
    while (!finished && absl::GetFlag(FLAGS_progress)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      const double t = elapsed();
      std::fprintf(stderr, "\r[%7.1fs] done %lld/%lld  errors %lld  output tok/s %.1f   ", t,
                   static_cast<long long>(done.load()), static_cast<long long>(n),
                   static_cast<long long>(failed.load()), t > 0 ? tokens.load() / t : 0.0);
    }
  });
  std::vector<std::thread> threads;
  std::atomic<int32_t> in_flight{0};  // open loop; outlives the request threads
  if (rate <= 0) {
    for (int32_t c = 0; c < conc; ++c)
      threads.emplace_back([&] {
        for (int64_t i; (i = next.fetch_add(1)) < n;) {
          if (limit > 0 && elapsed() >= limit) break;
          run_one(i);
        }
      });
  } else {
    std::mt19937_64 rng(absl::GetFlag(FLAGS_seed) + 17);
    std::exponential_distribution<double> gap(rate);
    double at = 0;
    for (int64_t i = 0; i < n; ++i) {
      at += gap(rng);
      if (limit > 0 && at >= limit) break;
      std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at)));
      while (in_flight.load() >= conc) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      in_flight.fetch_add(1);
      threads.emplace_back([&, i] {
        run_one(i);
        in_flight.fetch_sub(1);
      });
    }
  }
  for (auto& t : threads) t.join();
  finished = true;
  progress.join();
  if (absl::GetFlag(FLAGS_progress)) std::fprintf(stderr, "\n");
  const Slo slo{absl::GetFlag(FLAGS_slo_ttft_ms) / 1e3, absl::GetFlag(FLAGS_slo_tpot_ms) / 1e3};
  return {rate, Summarize(records, elapsed(), slo)};
}

nlohmann::json DistJson(const Distribution& d) {
  return {{"mean_ms", d.mean * 1e3}, {"p50_ms", d.p50 * 1e3}, {"p90_ms", d.p90 * 1e3}, {"p99_ms", d.p99 * 1e3},
          {"max_ms", d.max * 1e3}, {"count", d.count}};
}

void PrintTable(const RunResult& r) {
  const Summary& s = r.summary;
  std::printf("============ Serving benchmark (%s) ============\n",
              r.rate > 0 ? ("rate " + std::to_string(r.rate) + " req/s").c_str() : "closed loop");
  std::printf("%-34s %12.2f\n%-34s %12lld\n%-34s %12lld\n", "Duration (s):", s.duration_s, "Successful requests:",
              static_cast<long long>(s.completed), "Failed requests:", static_cast<long long>(s.failed));
  std::printf("%-34s %12.2f\n%-34s %12.1f\n%-34s %12.2f\n", "Request throughput (req/s):", s.request_throughput,
              "Output token throughput (tok/s):", s.output_throughput, "Goodput (req/s):", s.goodput);
  for (auto [name, d] : {std::pair<const char*, const Distribution*>{"TTFT", &s.ttft}, {"TPOT", &s.tpot},
                         {"ITL", &s.itl}, {"E2E", &s.e2e}}) {
    std::printf("%-6s (ms)  mean %9.2f  p50 %9.2f  p90 %9.2f  p99 %9.2f\n", name, d->mean * 1e3, d->p50 * 1e3,
                d->p90 * 1e3, d->p99 * 1e3);
  }
  for (const auto& [kind, count] : s.errors) std::printf("error %-28s %12lld\n", kind.c_str(), static_cast<long long>(count));
}

}  // namespace

int main(int argc, char** argv) {
  ls::ShowOwnFlagsInHelp();
  absl::SetProgramUsageMessage(
      "latentserve-bench --backend http|grpc --target HOST:PORT [--concurrency N | --request-rate R[,R...]]\n"
      "  [--num-requests M] [--duration S] [--dataset FILE] [--json FILE]");
  ls::ParseCommandLineAcceptingDashes(argc, argv);  // --request-rate as well as --request_rate

  ClientOptions o;
  const std::string target = absl::GetFlag(FLAGS_target);
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(target.substr(colon + 1), &o.port))
    return Fail("--target must be HOST:PORT, got '" + target + "'");
  o.host = target.substr(0, colon);
  o.endpoint = absl::GetFlag(FLAGS_endpoint);
  if (o.endpoint != "completions" && o.endpoint != "chat") return Fail("--endpoint must be completions or chat");
  o.model = absl::GetFlag(FLAGS_model);
  o.api_key = absl::GetFlag(FLAGS_api_key);
  if (o.api_key.empty() && std::getenv("LATENTSERVE_API_KEY")) o.api_key = std::getenv("LATENTSERVE_API_KEY");
  o.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  std::unique_ptr<Client> client;
  if (absl::GetFlag(FLAGS_backend) == "http") {
    client = MakeHttpClient(o);
  } else if (absl::GetFlag(FLAGS_backend) == "grpc") {
    client = MakeGrpcClient(o);
  } else {
    return Fail("--backend must be http or grpc");
  }
  std::vector<double> rates;
  for (absl::string_view r : absl::StrSplit(absl::GetFlag(FLAGS_request_rate), ',', absl::SkipWhitespace())) {
    double v;
    if (!absl::SimpleAtod(r, &v) || v <= 0) return Fail("--request-rate: '" + std::string(r) + "' is not a positive number");
    rates.push_back(v);
  }
  if (rates.empty()) rates.push_back(0);
  const int64_t n = absl::GetFlag(FLAGS_num_requests);
  if (n < 1) return Fail("--num-requests must be at least 1");
  // Checked before any request goes out, each naming its flag.
  if (absl::GetFlag(FLAGS_concurrency) < 1) return Fail("--concurrency must be at least 1");
  if (absl::GetFlag(FLAGS_input_len) < 1) return Fail("--input-len must be at least 1");
  if (absl::GetFlag(FLAGS_output_len) < 1) return Fail("--output-len must be at least 1");
  if (const double r = absl::GetFlag(FLAGS_range_ratio); !(r >= 0 && r <= 1))
    return Fail("--range-ratio must be in [0, 1]");
  if (absl::GetFlag(FLAGS_vocab) < 11) return Fail("--vocab must be above 10 (ids are drawn from [10, vocab))");
  if (absl::GetFlag(FLAGS_warmup) < 0) return Fail("--warmup must not be negative");
  if (!(absl::GetFlag(FLAGS_duration) >= 0)) return Fail("--duration must not be negative");
  if (!(absl::GetFlag(FLAGS_slo_ttft_ms) > 0) || !(absl::GetFlag(FLAGS_slo_tpot_ms) > 0))
    return Fail("--slo-ttft-ms and --slo-tpot-ms must be positive");

  std::vector<BenchRequest> work;
  if (!absl::GetFlag(FLAGS_dataset).empty()) {
    auto w = LoadJsonl(absl::GetFlag(FLAGS_dataset), absl::GetFlag(FLAGS_output_len));
    if (!w.ok()) return Fail(std::string(w.status().message()));
    for (int64_t i = 0; i < n; ++i) work.push_back((*w)[i % w->size()]);
  } else {
    SyntheticSpec spec{absl::GetFlag(FLAGS_input_len), absl::GetFlag(FLAGS_output_len), absl::GetFlag(FLAGS_range_ratio),
                       absl::GetFlag(FLAGS_vocab), absl::GetFlag(FLAGS_seed)};
    work = SyntheticWorkload(spec, n);
  }
  for (int32_t i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) {
    RequestRecord r = client->Send(work[i % work.size()], Clock::now());
    if (!r.error.empty()) return Fail("warm-up request failed: " + r.error);
  }
  nlohmann::json out = {{"backend", absl::GetFlag(FLAGS_backend)}, {"target", target},
                        {"concurrency", absl::GetFlag(FLAGS_concurrency)}, {"num_requests", n},
                        {"runs", nlohmann::json::array()}};
  bool any_failed = false;
  for (double rate : rates) {
    RunResult r = RunOnce(*client, work, rate);
    PrintTable(r);
    const Summary& s = r.summary;
    any_failed |= s.completed == 0;
    nlohmann::json errors = nlohmann::json::object();
    for (const auto& [k, v] : s.errors) errors[k] = v;
    out["runs"].push_back({{"request_rate", rate > 0 ? nlohmann::json(rate) : nlohmann::json("closed_loop")},
                           {"duration_s", s.duration_s},
                           {"completed", s.completed},
                           {"failed", s.failed},
                           {"request_throughput", s.request_throughput},
                           {"output_throughput", s.output_throughput},
                           {"goodput", s.goodput},
                           {"total_output_tokens", s.total_output_tokens},
                           {"ttft", DistJson(s.ttft)},
                           {"tpot", DistJson(s.tpot)},
                           {"itl", DistJson(s.itl)},
                           {"e2e", DistJson(s.e2e)},
                           {"errors", errors}});
  }
  if (!absl::GetFlag(FLAGS_json).empty()) {
    std::ofstream f(absl::GetFlag(FLAGS_json));
    f << out.dump(2) << "\n";
    if (!f) return Fail("cannot write " + absl::GetFlag(FLAGS_json));
  }
  return any_failed ? 1 : 0;
}
