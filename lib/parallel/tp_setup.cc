#include "lib/parallel/tp_setup.h"

#include <algorithm>
#include <thread>

#include "lib/common/status.h"
#include "lib/model/tp_shard.h"
#include "lib/parallel/host_collectives.h"
#include "lib/parallel/nccl_collectives.h"

namespace gannet::parallel {

absl::StatusOr<TpGroup> CreateTpGroup(const backend::BackendOptions& options, int world,
                                      std::vector<int> device_ids) {
  if (world < 1 || world > model::kMaxTensorParallel) {
    return InvalidArgumentError("tensor_parallel_size must be 1 to {}, got {}",
                                model::kMaxTensorParallel, world);
  }
  if (!device_ids.empty() && static_cast<int>(device_ids.size()) != world) {
    return InvalidArgumentError("{} device ids for tensor_parallel_size {}", device_ids.size(),
                                world);
  }
  TpGroup g;
  backend::BackendOptions o = options;
  o.device_id = device_ids.empty() ? 0 : device_ids[0];
  if (o.kind == "cpu" || (o.kind.empty() && !backend::CudaBackendCompiled())) {
    if (!device_ids.empty()) {
      return InvalidArgumentError("device ids name CUDA devices; the CPU backend has none");
    }
    const int threads =
        o.num_threads > 0 ? o.num_threads : static_cast<int>(std::thread::hardware_concurrency());
    o.kind = "cpu";
    o.num_threads = std::max(1, threads / world);
  }
  GANNET_ASSIGN_OR_RETURN(backend::BackendChoice first, backend::CreateBackend(o));
  g.fallback_reason = first.fallback_reason;
  const std::string kind(first.backend->name());
  g.backends.push_back(std::move(first.backend));
  if (kind == "cpu" && !device_ids.empty()) {
    return InvalidArgumentError("device ids name CUDA devices; the CPU backend was chosen ({})",
                                g.fallback_reason);
  }
  o.kind = kind;
  for (int r = 1; r < world; ++r) {
    o.device_id = device_ids.empty() ? r : device_ids[r];
    GANNET_ASSIGN_OR_RETURN(backend::BackendChoice c, backend::CreateBackend(o));
    g.backends.push_back(std::move(c.backend));
  }
  if (kind == "cpu") {
    auto group = std::make_shared<HostGroup>(world);
    for (int r = 0; r < world; ++r) g.collectives.push_back(group->Rank(r));
    g.shared = group;
    return g;
  }
  std::vector<backend::Backend*> raw;
  for (auto& b : g.backends) raw.push_back(b.get());
  GANNET_ASSIGN_OR_RETURN(g.collectives, CreateNcclGroup(raw));
  return g;
}

}  // namespace gannet::parallel
