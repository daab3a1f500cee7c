// EngineMetrics: bucket layouts and histogram arithmetic.
#include "engine/metrics.h"

#include <algorithm>

namespace ls {

void Histogram::Observe(double v) {
  const size_t i = std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin();
  ++counts[i];
  sum += v;
  ++count;
}

double Histogram::Quantile(double q) const {
  if (count == 0) return 0;
  const double target = q * static_cast<double>(count);
  double cum = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    cum += static_cast<double>(counts[i]);
    if (cum >= target) return i < bounds.size() ? bounds[i] : (bounds.empty() ? 0 : bounds.back());
  }
  return bounds.empty() ? 0 : bounds.back();
}

EngineMetrics::EngineMetrics() {
  const std::vector<double> latency = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
                                       0.5,   0.75,   1.0,   2.5,  5.0,   7.5,  10.0,  20.0, 40.0, 80.0};
  m_.queue_time = Histogram(latency);
  m_.ttft = Histogram(latency);
  m_.inter_token = Histogram(latency);
  m_.e2e = Histogram(latency);
  m_.tokens_per_step = Histogram({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192});
}

MetricsSnapshot EngineMetrics::Snapshot() const {
  MutexLock lock(&mu_);
  return m_;
}

}  // namespace ls
