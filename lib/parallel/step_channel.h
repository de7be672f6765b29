// The ordered messages rank 0 of a multi-process tensor-parallel group sends every other rank
// (step_message.h): over NCCL broadcasts between processes (nccl_collectives.h), or through host
// memory when the ranks are threads (host_collectives.h; tests of the same protocol on the CPU).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace gannet::parallel {

// How long a rank waits for rank 0 (no message while idle: rank 0 sends a heartbeat every
// kHeartbeatSeconds) or for a step to finish before it declares the group lost (device lost).
// GANNET_TP_TIMEOUT_S overrides it (tests of a killed rank shorten it).
inline constexpr double kHeartbeatSeconds = 1.0;
double GroupTimeoutSeconds();
// How long a rank of a multi-process group waits for the others to join (300 s;
// GANNET_TP_JOIN_TIMEOUT_S overrides it): ranks start their processes at different times.
double JoinTimeoutSeconds();

class StepChannel {
 public:
  virtual ~StepChannel() = default;
  // Rank 0: hands `msg` to every other rank (in order; returns once the bytes are handed off).
  virtual absl::Status Send(std::span<const uint8_t> msg) = 0;
  // Other ranks: the next message, or a device-lost error when none arrives within `timeout_s`.
  virtual absl::StatusOr<std::vector<uint8_t>> Receive(double timeout_s) = 0;
};

}  // namespace gannet::parallel
