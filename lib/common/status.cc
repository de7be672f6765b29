#include "lib/common/status.h"


namespace gannet {

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), fmt::format("{}: {}", context, status.message()));
}

}  // namespace gannet
