// The collectives of a tensor-parallel group of CUDA devices over NCCL, issued on each rank's
// backend stream (so they are recorded into the step graphs with the ops around them); small
// all-reduces go through the one-shot kernel (custom_allreduce.h) when the devices can reach each
// other's memory: peer access in one process, CUDA IPC with one process per rank. NVLink multicast
// (NVLS) is never requested: NCCL_NVLS_ENABLE=0 in the environment is honoured and, when unset, set
// to 0 for this process before the first communicator.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/backend/collectives.h"
#include "lib/parallel/step_channel.h"

namespace gannet::parallel {

// Bytes of the id that joins the processes of a group (an ncclUniqueId).
inline constexpr int kTpIdBytes = 128;

// Whether this build has NCCL.
bool NcclCompiled();

// One communicator per backend (all CUDA, distinct devices, this process; ncclCommInitAll), as
// collectives in rank order. NCCL errors name the operation and NCCL's message.
absl::StatusOr<std::vector<std::unique_ptr<backend::Collectives>>> CreateNcclGroup(
    const std::vector<backend::Backend*>& backends);

// One process per rank: rank 0's process makes the id (its bootstrap listens in this process
// until every rank has joined), the host application passes it to every rank, and each rank
// joins with its own device's backend. Joining waits until every rank has called it.
absl::StatusOr<std::string> CreateNcclId();
struct NcclRank {
  std::unique_ptr<backend::Collectives> collectives;
  std::unique_ptr<StepChannel> channel;  // rank 0 sends, the others receive
};
absl::StatusOr<NcclRank> JoinNcclGroup(backend::Backend* backend, int rank, int world,
                                       std::string_view id);

}  // namespace gannet::parallel
