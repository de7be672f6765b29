// What the engine steps: a target model that turns a StepBatch into a StepResult over KV storage
// it holds. One device (ModelRunner) or a tensor-parallel group of them (parallel::TpRunner); the
// engine and the scheduler do not know which.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "lib/kv/kv_layout.h"
#include "lib/runner/step.h"

namespace gannet::runner {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // Allocates the KV storage of `layout` (once). For a group, every rank allocates its own heads'
  // share of the same pages.
  virtual absl::Status AttachKv(const kv::KvLayout& layout) = 0;
  virtual absl::Status Forward(const StepBatch& batch, StepResult* result) = 0;
  // Bytes of weights this runner holds, over all its devices.
  virtual uint64_t weight_bytes() const = 0;
  // Device time of the last Forward (Backend::DeviceSpanSeconds of the device that samples).
  virtual absl::StatusOr<double> LastStepDeviceSeconds() = 0;
};

}  // namespace gannet::runner
