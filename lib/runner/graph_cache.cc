#include "lib/runner/graph_cache.h"

#include <algorithm>

#include "fmt/ranges.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"

namespace gannet::runner {

int BatchBucket(int num_seqs, int max_seqs) {
  const int b = num_seqs <= 4
                    ? (num_seqs <= 1 ? 1 : (num_seqs <= 2 ? 2 : 4))
                    : (num_seqs <= 64 ? (num_seqs + 7) / 8 * 8 : (num_seqs + 15) / 16 * 16);
  return std::min(b, max_seqs);
}

int LengthBucket(int max_seq_len) {
  int b = 256;
  while (b < max_seq_len) b *= 2;
  return b;
}

absl::Status GraphCache::Run(backend::Backend* be, const Key& key,
                             const std::function<absl::Status()>& ops, std::string_view what) {
  if (!be->SupportsGraphs()) return ops();
  Slot& slot = slots_[key];
  if (slot.handle >= 0 && slot.epoch != be->GraphEpoch()) {
    // A workspace the recording points into was reallocated since: record again.
    be->ReleaseGraph(slot.handle);
    slot.handle = -1;
    slot.warmed = false;
  }
  if (slot.handle >= 0) return be->LaunchGraph(slot.handle);
  if (!slot.warmed || slot.failed) {
    slot.warmed = true;
    return ops();
  }
  GANNET_RETURN_IF_ERROR(be->BeginGraphCapture());
  const uint64_t epoch = be->GraphEpoch();
  absl::Status st = ops();
  absl::StatusOr<int> handle = be->EndGraphCapture();
  if (st.ok() && handle.ok()) {
    slot.handle = *handle;
    slot.epoch = epoch;
    ++num_graphs_;
    return be->LaunchGraph(slot.handle);
  }
  slot.failed = true;
  GANNET_LOG_WARNING("{} of shape ({}) not captured ({}); running it without a graph", what,
                     fmt::join(key, ", "), st.ok() ? handle.status().message() : st.message());
  return ops();
}

}  // namespace gannet::runner
