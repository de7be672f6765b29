// What rank 0 of a multi-process tensor-parallel group tells the other ranks, as bytes: the
// runner limits (once), the KV layout (once), the drafter's limits (once, with speculative
// decoding), every step's batch and every draft round, heartbeats while idle, and the end. The
// receiving ranks rebuild the same values and run their shard of each step. Decoding checks every
// length against the message, so a corrupt message is an error, never a read past its end.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/kv/kv_layout.h"
#include "lib/runner/model_runner.h"
#include "lib/runner/step.h"
#include "lib/spec/drafter.h"

namespace gannet::parallel {

enum class StepOp : int32_t {
  kInit = 1,           // runner options
  kAttachKv = 2,       // the KV layout
  kStep = 3,           // a StepBatch
  kHeartbeat = 4,      // nothing; rank 0 is alive and idle
  kShutdown = 5,       // rank 0 is destroying the engine
  kAttachDrafter = 6,  // the drafter's options (speculative decoding)
  kDraft = 7,          // a draft round: its sequences and steps
};

std::vector<uint8_t> EncodeOp(StepOp op);  // kHeartbeat, kShutdown
std::vector<uint8_t> EncodeInit(const runner::RunnerOptions& options);
std::vector<uint8_t> EncodeAttachKv(const kv::KvLayout& layout);
std::vector<uint8_t> EncodeStep(const runner::StepBatch& batch);
std::vector<uint8_t> EncodeAttachDrafter(const spec::DrafterOptions& options);
std::vector<uint8_t> EncodeDraft(std::span<const spec::DraftSeq> seqs, int steps);

absl::StatusOr<StepOp> MessageOp(std::span<const uint8_t> msg);
// The runner limits of kInit (callbacks and the collectives pointer are left to the receiver).
absl::Status DecodeInit(std::span<const uint8_t> msg, runner::RunnerOptions* options);
absl::StatusOr<kv::KvLayout> DecodeAttachKv(std::span<const uint8_t> msg);

// A StepBatch whose spans point into storage this object owns.
struct DecodedStep {
  runner::StepBatch batch;
  std::vector<std::vector<int32_t>> storage;
};
absl::Status DecodeStep(std::span<const uint8_t> msg, DecodedStep* out);

absl::StatusOr<spec::DrafterOptions> DecodeAttachDrafter(std::span<const uint8_t> msg);
// A draft round whose page-table spans point into storage this object owns.
struct DecodedDraft {
  std::vector<spec::DraftSeq> seqs;
  int steps = 0;
  std::vector<std::vector<int32_t>> storage;
};
absl::Status DecodeDraft(std::span<const uint8_t> msg, DecodedDraft* out);

}  // namespace gannet::parallel
