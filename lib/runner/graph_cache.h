// Recorded step graphs keyed by step shape: the first visit of a shape runs eagerly (every op
// picks its algorithm and grows its workspaces), the second records and launches the recording,
// later ones replay it. A recording is dropped and made again when the backend's workspaces moved
// since (Backend::GraphEpoch); a shape whose capture failed stays eager. Backends without graphs
// always run eagerly. Used by the runner's decode/verify steps and the drafter's rounds.
// One thread at a time.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <string_view>

#include "absl/status/status.h"
#include "lib/backend/backend.h"

namespace gannet::runner {

// The batch size a graphed step of `num_seqs` sequences is padded to: small batches exactly, then
// steps of 8 up to 64, then of 16 (few graphs, little padding); at most max_seqs.
int BatchBucket(int num_seqs, int max_seqs);
// The context-length bound a graphed step uses (kernels size their split-KV grids from it): a
// power of two >= 256, so one recording serves every context that fits.
int LengthBucket(int max_seq_len);

class GraphCache {
 public:
  using Key = std::array<int, 5>;

  // Runs `ops` (which must only launch work: no host synchronisation, no host->device copies
  // from pageable memory) for the step shape `key`, from a graph where possible. `what` names
  // the kind of step in the warning when a capture fails.
  absl::Status Run(backend::Backend* be, const Key& key, const std::function<absl::Status()>& ops,
                   std::string_view what);

  int num_graphs() const { return num_graphs_; }

 private:
  struct Slot {
    int handle = -1;
    uint64_t epoch = 0;   // the backend's GraphEpoch when recorded
    bool warmed = false;  // ran once eagerly
    bool failed = false;  // capture failed: stay eager
  };
  std::map<Key, Slot> slots_;
  int num_graphs_ = 0;
};

}  // namespace gannet::runner
