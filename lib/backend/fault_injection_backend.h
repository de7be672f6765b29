// A test-only fault hook, compiled into every build and off unless GANNET_FAULT_INJECT_STEP is set:
// with GANNET_FAULT_INJECT_STEP=N the engine wraps its backend in this, and the N-th device span
// to end (one per forward step, after the step's work was issued and before its results are read;
// the drafter's rounds count too) fails as a lost device would (MarkDeviceLost). The engine must
// then end every affected request with a DEVICE_LOST event, refuse new ones, and never hang
// (tests/engine/fault_injection_test.cc on the CPU; tools/gpu/soak.sh on a GPU, where the step is
// replayed from a CUDA graph and no per-op hook would fire).
// Thread safety: that of the wrapped backend; the count is atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "lib/backend/forwarding_backend.h"

namespace gannet::backend {

class FaultInjectionBackend final : public ForwardingBackend {
 public:
  FaultInjectionBackend(std::unique_ptr<Backend> inner, int64_t fail_at_span)
      : ForwardingBackend(std::move(inner)), fail_at_(fail_at_span) {}
  absl::Status EndDeviceSpan() override;

 private:
  const int64_t fail_at_;
  std::atomic<int64_t> spans_{0};
};

// N from GANNET_FAULT_INJECT_STEP; 0 when it is unset (no fault). InvalidArgument for a value
// that is not a positive decimal integer.
absl::StatusOr<int64_t> FaultInjectionStepFromEnv();

}  // namespace gannet::backend
