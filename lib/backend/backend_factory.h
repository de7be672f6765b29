// Creates the backend an engine runs on: "cpu", "cuda", or "" for the best available (CUDA when
// this build has the CUDA backend and a device is usable, else the CPU).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/common/thread_pool.h"

namespace gannet::backend {

struct BackendOptions {
  std::string kind;    // "cpu", "cuda" or "" (auto)
  int device_id = 0;   // CUDA device ordinal
  int num_threads = 0; // CPU threads; 0 = hardware concurrency
};

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options);

// Whether this build carries the CUDA backend.
bool CudaBackendCompiled();

}  // namespace gannet::backend
