// The server's Prometheus metrics: per-request latencies (histograms) and token counters,
// recorded by the event poller, plus the engine's own gauges (gannet_engine_get_stats) read at
// scrape time. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "gannet/gannet.h"

namespace gannet_server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  // Prometheus text lines for `name` (the _bucket, _sum and _count series).
  std::string Render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  // A request's terminal event: its latencies (seconds; ttft < 0 = no token came) and counts.
  void RecordFinished(double ttft, double e2e, int32_t generated, int32_t prompt, int32_t cached,
                      int32_t finish_reason, bool error);
  void RecordHttp(int status);
  // The whole exposition; `stats` may be null (engine still loading).
  std::string Render(const gannet_engine_stats_t* stats, int active_http_streams) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_, tpot_, e2e_;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0, cached_tokens_ = 0;
  uint64_t finished_stop_ = 0, finished_length_ = 0, finished_cancelled_ = 0, finished_error_ = 0;
  uint64_t http_2xx_ = 0, http_4xx_ = 0, http_5xx_ = 0, http_429_ = 0;
};

}  // namespace gannet_server
