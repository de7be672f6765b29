#include "lib/backend/fault_injection_backend.h"

#include <cstdlib>
#include <string_view>

#include "lib/common/status.h"

namespace gannet::backend {

absl::Status FaultInjectionBackend::EndDeviceSpan() {
  GANNET_RETURN_IF_ERROR(ForwardingBackend::EndDeviceSpan());
  if (++spans_ == fail_at_) {
    return MarkDeviceLost(InternalError(
        "injected device fault at device span {} (GANNET_FAULT_INJECT_STEP; tests only)",
        fail_at_));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> FaultInjectionStepFromEnv() {
  const char* v = std::getenv("GANNET_FAULT_INJECT_STEP");
  if (v == nullptr || *v == '\0') return 0;
  int64_t n = 0;
  for (const char* c = v; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9' || n > (INT64_MAX - 9) / 10) {
      return InvalidArgumentError(
          "GANNET_FAULT_INJECT_STEP must be a positive step count (a test-only fault hook)");
    }
    n = n * 10 + (*c - '0');
  }
  if (n <= 0) {
    return InvalidArgumentError(
        "GANNET_FAULT_INJECT_STEP must be a positive step count (a test-only fault hook)");
  }
  return n;
}

}  // namespace gannet::backend
