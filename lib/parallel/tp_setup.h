// The devices of a tensor-parallel group in one process: a backend per rank and the collectives
// that join them (threads on the host for the CPU backend, NCCL between CUDA devices).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/backend/backend_factory.h"
#include "lib/backend/collectives.h"

namespace gannet::parallel {

struct TpGroup {
  std::vector<std::unique_ptr<backend::Backend>> backends;         // rank order
  std::vector<std::unique_ptr<backend::Collectives>> collectives;  // rank order
  std::shared_ptr<void> shared;  // what the collectives share; outlives them
  std::string fallback_reason;   // as BackendChoice::fallback_reason (automatic kind)
};

// `world` ranks on `options.kind` ("" = automatic, decided by rank 0's device). CUDA: rank r on
// device_ids[r] (empty = devices 0 .. world - 1); CPU: device_ids must be empty and the threads
// (options.num_threads, 0 = all) are split between the ranks.
absl::StatusOr<TpGroup> CreateTpGroup(const backend::BackendOptions& options, int world,
                                      std::vector<int> device_ids);

}  // namespace gannet::parallel
