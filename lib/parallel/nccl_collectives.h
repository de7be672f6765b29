// The collectives of a tensor-parallel group of CUDA devices over NCCL, issued on each rank's
// backend stream (so they are recorded into the step graphs with the ops around them).
// NVLink multicast (NVLS) is never requested: NCCL_NVLS_ENABLE=0 in the environment is honoured
// and, when unset, set to 0 for this process before the first communicator.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/backend/collectives.h"

namespace gannet::parallel {

// Whether this build has NCCL.
bool NcclCompiled();

// One communicator per backend (all CUDA, distinct devices, this process; ncclCommInitAll), as
// collectives in rank order. NCCL errors name the operation and NCCL's message.
absl::StatusOr<std::vector<std::unique_ptr<backend::Collectives>>> CreateNcclGroup(
    const std::vector<backend::Backend*>& backends);

}  // namespace gannet::parallel
