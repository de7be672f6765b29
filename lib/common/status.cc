#include "lib/common/status.h"

#include "absl/strings/cord.h"

namespace gannet {
namespace {

constexpr absl::string_view kDeviceLostUrl = "gannet/device-lost";

}  // namespace

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  absl::Status out(status.code(), fmt::format("{}: {}", context, status.message()));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

absl::Status MarkDeviceLost(absl::Status status) {
  if (!status.ok()) status.SetPayload(kDeviceLostUrl, absl::Cord("1"));
  return status;
}

bool IsDeviceLost(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kDeviceLostUrl).has_value();
}

}  // namespace gannet
