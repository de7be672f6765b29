// Creates the backend an engine runs on: "cpu", "cuda", or "" for the best available (CUDA when
// this build has the CUDA backend and a device is usable, else the CPU).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/common/thread_pool.h"

namespace gannet::backend {

struct BackendOptions {
  std::string kind;     // "cpu", "cuda" or "" (auto)
  int device_id = 0;    // CUDA device ordinal
  int num_threads = 0;  // CPU threads; 0 = hardware concurrency
  // What CUDA computes in (ParseComputeDType): "" or "auto" (f16 on GPUs older than sm_75, which
  // have no bf16 tensor cores; else bf16), "bf16" or "f16". The CPU backend computes in f32 and
  // takes only the automatic choice.
  std::string compute_dtype;
};

// nullopt for "" and "auto"; bf16 for "bf16"; f16 for "f16", "fp16" or "float16"; InvalidArgument
// naming the value otherwise.
absl::StatusOr<std::optional<DType>> ParseComputeDType(std::string_view name);

struct BackendChoice {
  std::unique_ptr<Backend> backend;
  // Set when the kind was automatic, this build has CUDA, and the CPU was chosen: why CUDA was
  // not usable (no device, no driver, an architecture older than the build's).
  std::string fallback_reason;
  // The fallback's reason is that the machine has no NVIDIA driver or no GPU: expected on a CPU
  // machine, so said at info level (any other reason, a driver too old say, is a warning).
  bool no_gpu = false;
};

// InvalidArgument for an unknown kind or a device ordinal that does not exist (never a silent
// fallback); Unimplemented for "cuda" in a build without it; the CUDA error when "cuda" was
// asked for and cannot start.
absl::StatusOr<BackendChoice> CreateBackend(const BackendOptions& options);

// Whether this build carries the CUDA backend.
bool CudaBackendCompiled();

}  // namespace gannet::backend
