// The kernel registry (docs/kernels-by-arch.md, "The kernel registry"): an explicit,
// hand-written list of compiled kernel entries (entries.cc; no static-constructor registration),
// and one selection function that runs at plan time. Selection clamps the device's compute
// capability to the highest arch this binary carries, filters entries by arch range, problem
// predicate and CanImplement, prefers the most specific entry (then the highest priority, then
// the newest arch, then the list's order), honours GANNET_FORCE_KERNEL=<name>[,<name>...]
// (the first named entry of the op that can implement the problem; an error naming each one's
// reason when entries of the op are named and none can), and logs its choice once per
// (op, problem class):
//   "attention.decode: sm80_hd512_bf16_split (device sm_90)".
//
// Thread safety: all functions may be called from any thread (the log-once set is locked).
#pragma once

#include <cuda_runtime_api.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/registry/problem.h"

namespace gannet::kernels {

// Why an entry can or cannot run a problem.
struct KernelStatus {
  bool ok = true;
  std::string reason;
  static KernelStatus Ok() { return {}; }
  static KernelStatus Fail(std::string why) { return {false, std::move(why)}; }
};

// The declarative part of an entry's applicability; 0 / -1 fields are "any". Each constrained
// field adds to the entry's specificity, so a dedicated hd512 kernel beats a generic one.
struct ProblemPredicate {
  DType in_type = DType::kBF16;
  DType kv_type = DType::kBF16;
  int head_dim = 0;            // exact head_dim, 0 = any
  int max_group_rows = 0;      // max_query_len * GQA group must fit, 0 = any
  int page_size_multiple = 0;  // page_size % this == 0, 0 = any
  int window = -1;             // -1 = windowed and full both fine, 0 = full only
  int max_m = 0;               // GEMM/MoE rows (num_tokens) at most this, 0 = any
  uint32_t required_flags = 0;
  // kCapabilityFlags the entry honours (problem.h); a problem with one it lacks is never its.
  // Not part of Specificity: a capable entry is no better for problems without the flag.
  uint32_t capabilities = 0;
};

struct KernelEntry {
  const char* name;  // unique; what GANNET_FORCE_KERNEL names
  Op op;
  int min_sm;  // arch range [min_sm, max_sm] of the *effective* (clamped) arch
  int max_sm;
  ProblemPredicate predicate;
  int priority;  // measured preference among equally specific entries (larger first), before the
                 // arch
  // Resource checks beyond the predicate (shared memory against the device's opt-in limit...).
  KernelStatus (*can_implement)(const ProblemKey& problem, const DeviceInfo& device);
  size_t (*workspace_bytes)(const ProblemKey& problem, const DeviceInfo& device);
  // `args` points at the op's parameter struct (PagedAttentionParams, GemvParams,
  // MoeExpertsParams). `workspace` holds at least workspace_bytes(problem) bytes of scratch;
  // entries keep no state in it between launches, so one workspace may serve every entry.
  cudaError_t (*launch)(const void* args, const ProblemKey& problem, const DeviceInfo& device,
                        void* workspace, cudaStream_t stream);
};

// Every entry compiled into this binary, in preference order within an op.
std::span<const KernelEntry* const> AllEntries();
const KernelEntry* FindEntry(std::string_view name);

// The CUDA archs this binary carries (from cmake/GannetCudaArchs.cmake), e.g. {75, 80, ..., 100}.
std::span<const int> CompiledArchs();
std::string CompiledArchsString();  // "sm_75 sm_80 ... sm_100"
// The highest compiled arch <= device_sm, or 0 when the binary carries none that can run. The
// `archs` overloads below take the arch list of another build (tests: what a release build would
// select on a device we do not have); the others use this binary's.
int EffectiveArch(int device_sm);
int EffectiveArch(int device_sm, std::span<const int> archs);

int Specificity(const ProblemPredicate& p);
// Arch range + predicate + can_implement of one entry.
KernelStatus CheckEntry(const KernelEntry& entry, const ProblemKey& problem,
                        const DeviceInfo& device);
KernelStatus CheckEntry(const KernelEntry& entry, const ProblemKey& problem,
                        const DeviceInfo& device, std::span<const int> archs);

struct Selection {
  const KernelEntry* entry = nullptr;  // null on failure
  std::string error;                   // every rejected entry and why, when entry is null
};
Selection Select(const ProblemKey& problem, const DeviceInfo& device);
Selection Select(const ProblemKey& problem, const DeviceInfo& device, std::span<const int> archs);

// Where selection logs go (default: stderr). The CUDA backend routes them into gannet's log.
void SetRegistryLogSink(void (*sink)(const char* message));

}  // namespace gannet::kernels
