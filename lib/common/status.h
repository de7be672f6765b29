// Status plumbing shared by all host code.
//
// Debian's abseil (20220623) predates absl's own RETURN_IF_ERROR/ASSIGN_OR_RETURN, so gannet
// carries its own. Canonical codes used throughout (docs/errors-and-abi.md):
//   bad input -> InvalidArgument, out of pages / queue full -> ResourceExhausted,
//   unsupported model/arch -> Unimplemented, corrupt checkpoint -> DataLoss,
//   CUDA/NCCL/cuBLASLt failures -> Internal (with the vendor's error name and call site).
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fmt/format.h"

#if !defined(ABSL_USES_STD_STRING_VIEW)
// Debian's abseil has its own string_view (Status::message() returns it): teach fmt to print it.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename Ctx>
  auto format(absl::string_view s, Ctx& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};
#endif

#define GANNET_CONCAT_INNER_(a, b) a##b
#define GANNET_CONCAT_(a, b) GANNET_CONCAT_INNER_(a, b)

#define GANNET_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status gannet_status_ = (expr);          \
    if (!gannet_status_.ok()) return gannet_status_; \
  } while (0)

#define GANNET_ASSIGN_OR_RETURN(lhs, rexpr) \
  GANNET_ASSIGN_OR_RETURN_IMPL_(GANNET_CONCAT_(gannet_statusor_, __LINE__), lhs, rexpr)

#define GANNET_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

namespace gannet {

// fmt-formatted constructors for the codes we use; keep messages specific: name the file,
// field, tensor, token or limit that is wrong.
template <typename... Args>
absl::Status InvalidArgumentError(fmt::format_string<Args...> f, Args&&... args) {
  return absl::InvalidArgumentError(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
absl::Status DataLossError(fmt::format_string<Args...> f, Args&&... args) {
  return absl::DataLossError(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
absl::Status UnimplementedError(fmt::format_string<Args...> f, Args&&... args) {
  return absl::UnimplementedError(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
absl::Status ResourceExhaustedError(fmt::format_string<Args...> f, Args&&... args) {
  return absl::ResourceExhaustedError(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
absl::Status InternalError(fmt::format_string<Args...> f, Args&&... args) {
  return absl::InternalError(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
absl::Status NotFoundError(fmt::format_string<Args...> f, Args&&... args) {
  return absl::NotFoundError(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
absl::Status FailedPreconditionError(fmt::format_string<Args...> f, Args&&... args) {
  return absl::FailedPreconditionError(fmt::format(f, std::forward<Args>(args)...));
}

// Prefixes a status message with context ("loading model.safetensors: ..."); keeps payloads.
absl::Status Annotate(const absl::Status& status, std::string_view context);

// Device loss: an accelerator failure after which the device's state is gone (a sticky CUDA
// error, an uncorrectable ECC error, a lost NCCL peer). The engine stops serving on such a status
// (GANNET_ERR_DEVICE_LOST) and on no other; the mark is a payload, so the decision never depends
// on message text or on which backend produced the error.
absl::Status MarkDeviceLost(absl::Status status);
bool IsDeviceLost(const absl::Status& status);

}  // namespace gannet
