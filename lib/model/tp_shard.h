// Megatron-style tensor-parallel sharding of a Gemma-4 target model, or of its MTP assistant
// (drafter): what one rank of a `world`-way group holds and computes.
//
// - Attention: q heads split evenly (column-parallel q/k/v, row-parallel o_proj); KV heads split
//   evenly, or, where a layer has fewer KV heads than ranks (31B full layers have 4), each rank
//   keeps the one KV head its q heads read (replicated across the ranks that share it).
// - MLP: gate/up column-parallel, down row-parallel (intermediate split).
// - MoE experts (MoeSplit): every expert's intermediate split the same way, or the experts
//   themselves split (expert parallelism: rank r holds a contiguous block of E / world experts and
//   computes only the pairs routed to them). The router is replicated, so every rank routes alike,
//   and either way the experts' output is one all-reduce of [T, H] partial sums.
// - Embedding and LM head: vocabulary-parallel (rows [begin, end) of the table per rank).
// - Norms, scalars, the router and the per-layer-embedding (PLE) block: replicated.
// - An assistant splits the same way: its q heads contiguously, which puts on each rank exactly
//   the q heads that read the target's KV heads that rank holds (the drafter reads the target's
//   KV, docs/speculative.md); its MLP like the target's; its dense LM head (the tied token
//   table) vocabulary-parallel. The centroid head (E2B/E4B assistants) stays whole on every
//   rank: it picks the top clusters from all cluster scores and their tokens fall in every
//   vocabulary shard, so a split head would need a kernel that masks to the rank's shard; the
//   table is small (vocabulary x the drafter's width). pre/post projections, centroids and the
//   token ordering are replicated.
//
// A rank's geometry is the model's with the split dimensions divided (ShardConfig); every rank
// has the same geometry, so one KV layout and one set of runner limits fit them all. The rank's
// weights are views into the checkpoint where the slice is contiguous (row slices) and copies
// where it is not (column slices of o_proj, down and the experts), owned by ShardedWeights.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"

namespace gannet::model {

inline constexpr int kMaxTensorParallel = 8;

// How a group splits the MoE experts. kAuto is DefaultMoeSplit's measured choice.
enum class MoeSplit : uint8_t { kAuto, kIntermediate, kExperts };

// The split a `world`-way group uses for `config`'s experts when none is asked for: the one that
// measured faster (docs/results-log/tp.md, "MoE split"); kIntermediate for models without experts.
MoeSplit DefaultMoeSplit(const ModelConfig& config, int world);
std::string_view MoeSplitName(MoeSplit split);

struct TpShard {
  int rank = 0;
  int world = 1;
  MoeSplit moe = MoeSplit::kAuto;
};

// Whether `config` splits `world` ways (1 <= world <= kMaxTensorParallel); the error names the
// dimension that does not divide.
absl::Status CheckTpShardable(const ModelConfig& config, int world, MoeSplit moe = MoeSplit::kAuto);

// The geometry every rank of a `world`-way group computes with: heads, KV heads, intermediate
// sizes divided (and local_experts set when the experts are split). vocab_size stays the model's
// (token ids are global); a rank's LM head and embedding hold VocabShardSize rows.
ModelConfig ShardConfig(const ModelConfig& config, int world, MoeSplit moe = MoeSplit::kAuto);

int64_t VocabShardSize(const ModelConfig& config, int world);
// The first KV head (in the model's numbering) a rank holds for a layer with `num_kv_heads`.
int KvHeadBegin(int num_kv_heads, TpShard shard);

struct ShardedWeights {
  ModelWeights views;                               // shaped for ShardConfig(config, world)
  std::vector<std::unique_ptr<uint8_t[]>> storage;  // the copied (column) slices
  int64_t copied_bytes = 0;
};

// The rank's weights. Synthetic (dummy) weights stay synthetic: a shard is generated with the
// shard's shape under a name of its own (dummy values differ from the unsharded model's; they
// are for speed and memory measurements only).
absl::StatusOr<std::unique_ptr<ShardedWeights>> ShardWeights(const ModelConfig& config,
                                                             const ModelWeights& weights,
                                                             TpShard shard);

// Parameters one rank of a `world`-way group holds (every rank holds as many).
int64_t ShardParameterCount(const ModelConfig& config, int world, MoeSplit moe = MoeSplit::kAuto);

}  // namespace gannet::model
