// Serving-benchmark statistics.
#include "tools/bench/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ls::bench {

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

Distribution Summarize(const std::vector<double>& v) {
  Distribution d;
  d.count = static_cast<int64_t>(v.size());
  if (v.empty()) return d;
  d.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  d.p50 = Percentile(v, 50);
  d.p90 = Percentile(v, 90);
  d.p99 = Percentile(v, 99);
  d.max = *std::max_element(v.begin(), v.end());
  return d;
}

bool Tpot(const RequestRecord& r, double* tpot) {
  if (r.output_tokens < 2 || r.first_token < 0) return false;
  *tpot = (r.end - r.first_token) / (r.output_tokens - 1);
  return true;
}

Summary Summarize(const std::vector<RequestRecord>& records, double duration_s, const Slo& slo) {
  Summary s;
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t good = 0;
  for (const auto& r : records) {
    if (!r.error.empty()) {
      ++s.failed;
      ++s.errors[r.error];
      continue;
    }
    ++s.completed;
    s.total_output_tokens += r.output_tokens;
    s.total_prompt_tokens += r.prompt_tokens;
    e2e.push_back(r.end - r.start);
    const double t = r.first_token >= 0 ? r.first_token - r.start : r.end - r.start;
    ttft.push_back(t);
    double tp = 0;
    const bool has_tpot = Tpot(r, &tp);
    if (has_tpot) tpot.push_back(tp);
    for (size_t i = 1; i < r.token_times.size(); ++i) itl.push_back(r.token_times[i] - r.token_times[i - 1]);
    if (t <= slo.ttft_s && (!has_tpot || tp <= slo.tpot_s)) ++good;
  }
  s.ttft = Summarize(ttft);
  s.tpot = Summarize(tpot);
  s.itl = Summarize(itl);
  s.e2e = Summarize(e2e);
  if (duration_s > 0) {
    s.request_throughput = static_cast<double>(s.completed) / duration_s;
    s.output_throughput = static_cast<double>(s.total_output_tokens) / duration_s;
    s.goodput = static_cast<double>(good) / duration_s;
  }
  return s;
}

}  // namespace ls::bench
