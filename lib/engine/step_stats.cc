#include "lib/engine/step_stats.h"

namespace gannet::engine {

void StepStats::Record(int64_t prompt_tokens, int64_t generated_tokens, double /*seconds*/) {
  stats_.total_prompt_tokens += prompt_tokens;
  stats_.total_generated_tokens += generated_tokens;
  ++stats_.num_steps;
  const auto now = std::chrono::steady_clock::now();
  window_.push_back({now, prompt_tokens, generated_tokens});
  while (!window_.empty() &&
         std::chrono::duration<double>(now - window_.front().at).count() > kWindowSeconds) {
    window_.pop_front();
  }
}

void StepStats::RecordSpec(int64_t verify_chunks, int64_t drafts, int64_t accepted,
                           int64_t rounds) {
  stats_.spec_verify_chunks += verify_chunks;
  stats_.spec_draft_tokens += drafts;
  stats_.spec_accepted_tokens += accepted;
  stats_.spec_draft_rounds = rounds;
  if (stats_.spec_verify_chunks > 0) {
    stats_.spec_mean_accepted_length =
        static_cast<double>(stats_.spec_accepted_tokens + stats_.spec_verify_chunks) /
        static_cast<double>(stats_.spec_verify_chunks);
  }
}

void StepStats::RecordTiming(double wall_seconds, double device_seconds) {
  ++stats_.timed_decode_steps;
  stats_.timed_decode_seconds += wall_seconds;
  stats_.timed_decode_device_seconds += device_seconds;
}

EngineStats StepStats::Snapshot() const {
  EngineStats s = stats_;
  if (window_.size() >= 2) {
    const double span =
        std::chrono::duration<double>(window_.back().at - window_.front().at).count();
    int64_t prompt = 0, generated = 0;
    // The first sample opens the window; count the tokens of the steps after it.
    for (size_t i = 1; i < window_.size(); ++i) {
      prompt += window_[i].prompt;
      generated += window_[i].generated;
    }
    if (span > 0) {
      s.prompt_tokens_per_s = prompt / span;
      s.generated_tokens_per_s = generated / span;
    }
  }
  return s;
}

}  // namespace gannet::engine
