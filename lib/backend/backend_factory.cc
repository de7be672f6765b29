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

absl::StatusOr<BackendChoice> CreateBackendUnprofiled(const BackendOptions& o);

absl::StatusOr<BackendChoice> CreateBackend(const BackendOptions& o) {
  GANNET_ASSIGN_OR_RETURN(BackendChoice c, CreateBackendUnprofiled(o));
  const char* profile = std::getenv("GANNET_PROFILE_OPS");
  if (profile != nullptr && std::string(profile) == "1") {
    GANNET_LOG_WARNING("backend: GANNET_PROFILE_OPS=1: every op is synchronised and timed");
    c.backend = std::unique_ptr<Backend>(new ProfilingBackend(std::move(c.backend)));
  }
  return c;
}

absl::StatusOr<std::optional<DType>> ParseComputeDType(std::string_view name) {
  if (name.empty() || name == "auto") return std::optional<DType>();
  if (name == "bf16") return std::optional<DType>(DType::kBF16);
  if (name == "f16" || name == "fp16" || name == "float16")
    return std::optional<DType>(DType::kF16);
  return InvalidArgumentError("compute_dtype '{}' is not one of auto (the default), bf16, f16",
                              name);
}

absl::StatusOr<BackendChoice> CreateBackendUnprofiled(const BackendOptions& o) {
  if (o.kind != "cuda" && o.kind != "cpu" && !o.kind.empty()) {
    return InvalidArgumentError("backend '{}' is not one of cpu, cuda", o.kind);
  }
  if (o.device_id < 0) return InvalidArgumentError("device {} does not exist", o.device_id);
  GANNET_ASSIGN_OR_RETURN(const std::optional<DType> compute, ParseComputeDType(o.compute_dtype));
  // An explicit compute type is asking for CUDA: the CPU computes in f32 and would ignore it.
  auto cpu_takes_it = [&]() -> absl::Status {
    if (!compute.has_value()) return absl::OkStatus();
    return InvalidArgumentError(
        "compute_dtype '{}' needs the CUDA backend (the CPU backend computes in f32)",
        o.compute_dtype);
  };
  BackendChoice c;
  if (o.kind == "cpu") {
    GANNET_RETURN_IF_ERROR(cpu_takes_it());
    c.backend = MakeCpu(o.num_threads);
    return c;
  }
#ifdef GANNET_WITH_CUDA_BACKEND
  absl::StatusOr<std::unique_ptr<Backend>> cuda = CreateCudaBackend(o.device_id, compute);
  if (cuda.ok()) {
    c.backend = *std::move(cuda);
    return c;
  }
  // An explicit "cuda", or a device ordinal that does not exist, is the caller's error; only an
  // automatic choice with no usable device falls back.
  if (o.kind == "cuda" || absl::IsInvalidArgument(cuda.status())) return cuda.status();
  if (o.device_id > 0) {
    // Asking for a device is asking for CUDA: running on the CPU instead would ignore it.
    return InvalidArgumentError("device {} does not exist: {}", o.device_id,
                                cuda.status().message());
  }
  GANNET_RETURN_IF_ERROR(cpu_takes_it());
  c.fallback_reason = std::string(cuda.status().message());
  c.no_gpu = absl::IsNotFound(cuda.status());
  c.backend = MakeCpu(o.num_threads);
  return c;
#else
  if (o.kind == "cuda") {
    return UnimplementedError("backend 'cuda': this build of gannet has no CUDA backend");
  }
  if (o.device_id > 0) {
    return InvalidArgumentError("device {} does not exist (this build runs on the CPU only)",
                                o.device_id);
  }
  GANNET_RETURN_IF_ERROR(cpu_takes_it());
  c.backend = MakeCpu(o.num_threads);
  return c;
#endif
}

}  // namespace gannet::backend
