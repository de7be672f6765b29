// Keeps a decode step's weight reads streaming ahead of the projections that need them.
//
// A decode step of a small model is a chain of ~470 short kernels. Between its projections (which
// stream weights at or near DRAM bandwidth) come QKV prep, attention over a short context, the
// split merge and the norms: several microseconds each in which DRAM sits idle, because the next
// projection's kernel cannot start before them. At chosen points of the step the runner asks the
// backend to start moving the weights that come next into its cache (Backend::PrefetchWeights),
// up to `ahead` bytes past the next weight to be read, so those idle stretches carry the next
// projections' bytes. The weights are walked in the order a step reads them; a cursor remembers
// how far the step has asked for, so every byte is requested once a step.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "lib/backend/backend.h"
#include "lib/model/config.h"
#include "lib/runner/device_weights.h"

namespace gannet::runner {

// Steps with more tokens than this read their weights in compute-bound GEMMs (prefill): no
// prefetching there.
inline constexpr int kPrefetchMaxTokens = 64;

class WeightPrefetch {
 public:
  // The points of a step at which the runner calls Ahead, named by what is read next.
  enum class Point {
    kStepStart,     // before layer 0's QKV projection
    kAfterQkvPrep,  // layer l's attention, then its o_proj
    kAfterFfn,      // layer l's MLP/MoE done: its PLE projections, or the next layer's QKV (or the LM head)
  };

  WeightPrefetch() = default;
  // `ahead`: bytes to keep requested past the next weight a step reads (0 = off).
  WeightPrefetch(const DeviceWeights& w, const model::TextConfig& c, int64_t ahead);

  int64_t ahead() const { return ahead_; }
  // Total bytes of the weights walked (dense projections and the LM head; the MoE experts are
  // chosen per token and not included).
  int64_t stream_bytes() const { return starts_.empty() ? 0 : starts_.back(); }

  // Starts a step: nothing requested yet. `tokens` over kPrefetchMaxTokens (or ahead == 0) turn
  // every Ahead of the step into a no-op.
  void BeginStep(int tokens);
  // Requests [max(cursor, start of the next weight), start of the next weight + ahead).
  absl::Status Ahead(backend::Backend* be, Point point, int layer);

  // For tests: the stream index Ahead(point, layer) names as the next weight read.
  size_t NextIndex(Point point, int layer) const;
  // For tests: the ranges of stream bytes [from, to), cut at tensor bounds and aligned to 16.
  std::vector<backend::DeviceRange> RangesOf(int64_t from, int64_t to) const;

 private:
  struct Piece {
    const char* data;
    int64_t bytes;
  };
  std::vector<Piece> pieces_;    // in the order a step reads them
  std::vector<int64_t> starts_;  // stream offset of each piece; back() = total
  std::vector<size_t> qkv_index_;  // per layer: its QKV projection's piece
  std::vector<size_t> after_ffn_index_;  // per layer: the piece read after its MLP/MoE
  int64_t ahead_ = 0;
  int64_t cursor_ = 0;
  bool active_ = false;
};

// The default distance ahead for a backend: half of its weight cache (leaving the rest to what
// the kernels in between read), or GANNET_PREFETCH_MB when set (0 = off; a diagnostics switch for
// measuring with and without).
int64_t DefaultPrefetchAhead(const backend::Backend& be);

}  // namespace gannet::runner
