// Engine statistics: counters and gauges (EngineStats) plus token rates over a sliding window of
// recent steps. Guarded by the engine's mutex; not thread-safe on its own.
#pragma once

#include <chrono>
#include <deque>

#include "lib/engine/engine.h"

namespace gannet::engine {

class StepStats {
 public:
  // One completed step: prompt tokens computed, tokens generated, and its duration.
  void Record(int64_t prompt_tokens, int64_t generated_tokens, double seconds);
  // The step's verify chunks, the drafts they verified and accepted; drafter rounds so far.
  void RecordSpec(int64_t verify_chunks, int64_t drafts, int64_t accepted, int64_t rounds);
  // One back-to-back decode step's wall time and the device time of its work.
  void RecordTiming(double wall_seconds, double device_seconds);
  EngineStats& gauges() { return stats_; }
  EngineStats Snapshot() const;

 private:
  struct Sample {
    std::chrono::steady_clock::time_point at;
    int64_t prompt;
    int64_t generated;
  };
  static constexpr double kWindowSeconds = 5.0;
  EngineStats stats_;
  std::deque<Sample> window_;
};

}  // namespace gannet::engine
