// Serving-benchmark statistics: per-request records in, summary figures out (throughput, TTFT,
// time per output token, inter-token latency, end-to-end latency, goodput under an SLO, errors by
// kind). Pure functions, unit-tested against hand-computed cases.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ls::bench {

// One request as the client saw it. Times are seconds from the start of the run.
struct RequestRecord {
  double start = 0;
  double first_token = -1;            // -1: no token arrived
  double end = 0;
  std::vector<double> token_times;    // arrival time of every streamed chunk that carried tokens
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;
  std::string error;                  // empty on success; else the error kind (e.g. "http_429")
};

struct Distribution {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  int64_t count = 0;
};

// Linear-interpolation percentile (numpy's default) of unsorted values; q in [0, 100].
double Percentile(std::vector<double> values, double q);
Distribution Summarize(const std::vector<double>& values);

struct Slo {
  double ttft_s = 1e30;  // a request counts as good when TTFT <= ttft_s
  double tpot_s = 1e30;  // and time per output token <= tpot_s
};

struct Summary {
  double duration_s = 0;
  int64_t completed = 0, failed = 0;
  double request_throughput = 0;  // completed requests per second
  double output_throughput = 0;   // output tokens per second
  double goodput = 0;             // requests per second meeting the SLO
  int64_t total_output_tokens = 0, total_prompt_tokens = 0;
  Distribution ttft, tpot, itl, e2e;
  std::map<std::string, int64_t> errors;
};

// TPOT of a request: (end − first token) / (output tokens − 1); undefined for < 2 tokens.
bool Tpot(const RequestRecord& r, double* tpot);
Summary Summarize(const std::vector<RequestRecord>& records, double duration_s, const Slo& slo);

}  // namespace ls::bench
