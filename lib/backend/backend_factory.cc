#include "lib/backend/backend_factory.h"

#include <cstdlib>
#include <string>
#include <thread>

#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/profiling_backend.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"
#ifdef GANNET_WITH_CUDA_BACKEND
#include "lib/backend/cuda/cuda_backend.h"
#endif

namespace gannet::backend {
namespace {

// A CPU backend that owns its thread pool.
class OwningCpuBackend final : public CpuBackend {
 public:
  explicit OwningCpuBackend(std::unique_ptr<ThreadPool> pool)
      : CpuBackend(pool.get()), owned_(std::move(pool)) {}

 private:
  std::unique_ptr<ThreadPool> owned_;
};

std::unique_ptr<Backend> MakeCpu(int num_threads) {
  int n = num_threads > 0 ? num_threads : static_cast<int>(std::thread::hardware_concurrency());
  return std::make_unique<OwningCpuBackend>(std::make_unique<ThreadPool>(std::max(1, n)));
}

}  // namespace

bool CudaBackendCompiled() {
#ifdef GANNET_WITH_CUDA_BACKEND
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackendUnprofiled(const BackendOptions& o);

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& o) {
  GANNET_ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, CreateBackendUnprofiled(o));
  const char* profile = std::getenv("GANNET_PROFILE_OPS");
  if (profile != nullptr && std::string(profile) == "1") {
    GANNET_LOG_WARNING("backend: GANNET_PROFILE_OPS=1: every op is synchronised and timed");
    return std::unique_ptr<Backend>(new ProfilingBackend(std::move(b)));
  }
  return b;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackendUnprofiled(const BackendOptions& o) {
  if (o.kind == "cpu") return MakeCpu(o.num_threads);
  if (o.kind != "cuda" && !o.kind.empty()) {
    return InvalidArgumentError("backend '{}' is not one of cpu, cuda", o.kind);
  }
#ifdef GANNET_WITH_CUDA_BACKEND
  absl::StatusOr<std::unique_ptr<Backend>> cuda = CudaBackend::Create(o.device_id);
  if (cuda.ok() || o.kind == "cuda") return cuda;
  GANNET_LOG_INFO("backend: CUDA unavailable ({}); using the CPU", cuda.status().message());
  return MakeCpu(o.num_threads);
#else
  if (o.kind == "cuda") {
    return UnimplementedError("backend 'cuda': this build of gannet has no CUDA backend");
  }
  return MakeCpu(o.num_threads);
#endif
}

}  // namespace gannet::backend
