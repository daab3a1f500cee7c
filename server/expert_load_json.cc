// ExpertLoadJson: written straight into one string with std::to_chars (a K3-sized answer holds
// about 200,000 numbers; no JSON tree is built).
#include "server/expert_load_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string_view>

namespace ls::server {
namespace {

class Writer {
 public:
  explicit Writer(size_t reserve) { out_.reserve(reserve); }
  Writer& Raw(std::string_view s) {
    out_.append(s);
    return *this;
  }
  Writer& Int(int64_t v) {
    char buf[24];
    out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    return *this;
  }
  // Shortest form that reads back to the same double; JSON has no NaN or infinity, so those write 0.
  Writer& Num(double v) {
    if (!std::isfinite(v)) v = 0;
    char buf[32];
    out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    return *this;
  }
  // A JSON string, escaped.
  Writer& Str(std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    out_ += '"';
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += ch;
      } else if (c < 0x20) {
        out_.append("\\u00");
        out_ += kHex[c >> 4];
        out_ += kHex[c & 15];
      } else {
        out_ += ch;
      }
    }
    out_ += '"';
    return *this;
  }
  // "key": (after a comma unless first)
  Writer& Key(std::string_view key, bool first = false) {
    if (!first) out_ += ',';
    out_ += '"';
    out_.append(key);
    out_.append("\":");
    return *this;
  }
  template <typename It>
  Writer& IntArray(It begin, It end) {
    out_ += '[';
    for (It it = begin; it != end; ++it) {
      if (it != begin) out_ += ',';
      Int(*it);
    }
    out_ += ']';
    return *this;
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

double MaxOverMeanOf(const int64_t* v, int32_t n) {
  int64_t sum = 0, mx = 0;
  for (int32_t i = 0; i < n; ++i) {
    sum += v[i];
    mx = std::max(mx, v[i]);
  }
  return sum > 0 ? static_cast<double>(mx) * n / static_cast<double>(sum) : 0.0;
}

}  // namespace

std::string ExpertLoadJson(const MetricsSnapshot& m, const ExpertLoadWindowSnapshot& w,
                           const ExpertLoadJsonOptions& options) {
  const int32_t N = w.num_experts, D = m.num_devices, S = m.slots_per_device;
  const size_t layers = w.moe_layers.size();
  // About 7 bytes a window count, 4 a slot, 11 a total: one allocation for the whole answer.
  Writer j(4096 + layers * (static_cast<size_t>(N) * (options.totals ? 18 : 7) + static_cast<size_t>(D) * S * 4 + 64));
  j.Raw("{").Key("object", true).Raw("\"expert_load\"");
  j.Key("model").Str(options.model);
  j.Key("time").Num(options.now_unix_seconds);
  j.Key("steps").Int(static_cast<int64_t>(m.steps));
  j.Key("num_layers").Int(m.num_layers);
  j.Key("num_experts").Int(N);
  j.Key("num_devices").Int(D);
  j.Key("slots_per_device").Int(S);
  j.Key("window").Raw("{").Key("steps", true).Int(w.steps);
  j.Key("capacity").Int(w.capacity);
  j.Key("first_step_time").Num(w.first_step_unix_seconds);
  j.Key("last_step_time").Num(w.last_step_unix_seconds).Raw("}");
  j.Key("replans").Int(static_cast<int64_t>(m.replans));
  j.Key("replan_seconds_total").Num(m.replan_seconds_total);
  j.Key("last_replan_seconds").Num(m.last_replan_seconds);
  j.Key("longest_switch_step_seconds").Num(m.longest_switch_step_seconds);
  j.Key("replan_events").Raw("[");
  for (size_t i = 0; i < m.replan_events.size(); ++i) {
    const ReplanEvent& e = m.replan_events[i];
    j.Raw(i ? ",{" : "{").Key("time", true).Num(e.unix_seconds);
    j.Key("step").Int(static_cast<int64_t>(e.step));
    j.Key("plan_seconds").Num(e.plan_seconds);
    j.Key("device_max_over_mean_before").Num(e.device_max_over_mean_before);
    j.Key("device_max_over_mean_after").Num(e.device_max_over_mean_after);
    j.Key("chunks").Int(e.chunks);
    j.Key("max_chunk_seconds").Num(e.max_chunk_seconds).Raw("}");
  }
  j.Raw("]").Key("migration_chunks").Raw("[");
  for (size_t i = 0; i < m.migration_chunks.size(); ++i) {
    const MigrationChunk& c = m.migration_chunks[i];
    j.Raw(i ? ",{" : "{").Key("time", true).Num(c.unix_seconds);
    j.Key("step").Int(static_cast<int64_t>(c.step));
    j.Key("slots").Int(c.slots);
    j.Key("bytes").Int(c.bytes);
    j.Key("seconds").Num(c.seconds).Raw("}");
  }
  j.Raw("]").Key("layers").Raw("[");
  for (size_t i = 0; i < layers; ++i) {
    const int32_t l = w.moe_layers[i];
    const int64_t* tokens = w.tokens.data() + i * N;
    j.Raw(i ? ",{" : "{").Key("layer", true).Int(l);
    j.Key("tokens").IntArray(tokens, tokens + N);
    j.Key("max_over_mean").Num(MaxOverMeanOf(tokens, N));
    const bool have_total = m.num_experts == N && m.expert_tokens.size() >= static_cast<size_t>(l + 1) * N;
    const int64_t* total = have_total ? m.expert_tokens.data() + static_cast<size_t>(l) * N : nullptr;
    j.Key("total_max_over_mean").Num(total ? MaxOverMeanOf(total, N) : 0.0);
    if (options.totals && total) j.Key("tokens_total").IntArray(total, total + N);
    if (D > 0 && m.device_rows.size() >= static_cast<size_t>(l + 1) * D) {
      const int64_t* rows = m.device_rows.data() + static_cast<size_t>(l) * D;
      j.Key("device_rows").IntArray(rows, rows + D);
      j.Key("device_max_over_mean").Num(MaxOverMeanOf(rows, D));
      j.Key("slot_expert").Raw("[");
      const std::vector<int32_t>* map = static_cast<size_t>(l) < m.replica_map.size() ? &m.replica_map[l] : nullptr;
      for (int32_t d = 0; d < D; ++d) {
        if (d) j.Raw(",");
        if (map && map->size() == static_cast<size_t>(D) * S)
          j.IntArray(map->begin() + static_cast<size_t>(d) * S, map->begin() + static_cast<size_t>(d + 1) * S);
        else
          j.Raw("[]");
      }
      j.Raw("]");
    }
    j.Raw("}");
  }
  j.Raw("]}");
  return j.Take();
}

}  // namespace ls::server
