// Runs Gemma-4 target models step by step over a Backend: the layer recipe of every variant
// (dense 31B, MoE 26B-A4B, PLE + KV-sharing E2B/E4B), exactly as docs/gemma4-model.md §2.
//
// The runner owns the model's weights in backend memory, activation buffers sized for
// `max_tokens` tokens and `max_seqs` sequences per step, and the KV storage, which AttachKv
// allocates from the KV layout once the memory left after weights and activations is known;
// Forward() never allocates. It does not decide which pages a sequence owns: each SeqStep brings
// its page tables (from the KV manager, or a trivial identity table in tests). Padded decode rows
// write and read each pool's padding page (kv_layout.h). One thread at a time.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/model/config.h"
#include "lib/model/tp_shard.h"
#include "lib/model/weights.h"
#include "lib/runner/device_weights.h"
#include "lib/runner/kv_storage.h"
#include "lib/runner/step.h"
#include "lib/runner/step_runner.h"
#include "lib/runner/tp_hooks.h"

namespace gannet::runner {

struct RunnerOptions {
  int max_tokens = 256;       // tokens per step (prefill chunk budget + decodes)
  int max_seqs = 16;          // sequences per step
  int max_logit_rows = 0;     // logits rows per step; 0 = max_seqs
  int max_pages_per_seq = 0;  // page-table columns; 0 = enough for max_position_embeddings
  int page_size = 16;         // KV page size in tokens (AttachKv's layout must agree)
  // Called while weights load (device_weights.h); returning false cancels the load.
  WeightProgressFn on_weight_progress;
  // Called for each checkpoint tensor the backend copied (device_weights.h).
  WeightCopiedFn on_weight_copied;
  // Decode-only steps are padded to a batch-size bucket and, on backends with graphs, recorded
  // once per (bucket, context-length bucket) and replayed. pad_decode_batches pads without graphs
  // (tests check padded steps compute what unpadded ones do).
  bool enable_graphs = true;
  bool pad_decode_batches = false;
  // Tensor parallelism: this runner is one rank of a group, whose hooks (tp_hooks.h, implemented
  // by lib/parallel; not owned) it calls; null = the whole model on one backend. The config and
  // weights given to Create are then the rank's shard (model/tp_shard.h); the runner sums the
  // partials after o_proj, the MLP/MoE down projections and the vocabulary-parallel embedding,
  // and either exchanges the ranks' best picks (all-greedy steps) or gathers the LM head's
  // vocabulary shards into full logits rows, which rank 0 samples and returns (other ranks'
  // Forward returns no result).
  TpHooks* tp = nullptr;
  // How a tensor-parallel group splits MoE experts (lib/model/tp_shard.h). Every rank of a group
  // must use the same; kAuto (DefaultMoeSplit) is what the engine uses, the others are for
  // measuring the two against each other and for tests.
  model::MoeSplit moe_split = model::MoeSplit::kAuto;
};

// The rotary embedding of a layer type as the config defines it (sliding: default RoPE; full:
// proportional, docs/gemma4-model.md §2.5).
backend::RopeSpec RopeSpecOf(const model::TextConfig& config, bool sliding);

// The element types a backend allocates the step's buffers in (Backend::activation_dtype,
// norm_input_dtype, residual_dtype).
struct ActivationTypes {
  DType act = DType::kBF16;
  DType norm_input = DType::kBF16;
  DType residual = DType::kF32;
  static ActivationTypes Of(const backend::Backend& be) {
    return {be.activation_dtype(), be.norm_input_dtype(), be.residual_dtype()};
  }
};

// Bytes of the activation and step-metadata buffers Create allocates for these options, with the
// given element types. The engine checks the device can hold weights and these before loading
// anything.
int64_t ActivationBytes(const model::ModelConfig& config, const RunnerOptions& options,
                        const ActivationTypes& types);

class ModelRunner : public StepRunner {
 public:
  // `weights` must stay valid while the runner lives when the backend reads them in place (the CPU
  // backend reads bf16 checkpoints in place, from the memory the Checkpoint read them into).
  static absl::StatusOr<std::unique_ptr<ModelRunner>> Create(const model::ModelConfig& config,
                                                             const model::ModelWeights& weights,
                                                             backend::Backend* backend,
                                                             const RunnerOptions& options);
  ~ModelRunner() override;

  // Allocates the KV storage of `layout` (once; its layers must be KvLayersOf(config) and its
  // page size options().page_size). Forward needs it.
  absl::Status AttachKv(const kv::KvLayout& layout) override;
  // `result` may be null on a tensor-parallel rank other than 0.
  absl::Status Forward(const StepBatch& batch, StepResult* result) override;
  absl::StatusOr<double> LastStepDeviceSeconds() override;

  const model::ModelConfig& config() const;
  const RunnerOptions& options() const;
  const KvStorage* kv() const;  // null before AttachKv
  // What the MTP drafter (lib/spec) reads from its target: the token embedding table (the drafter
  // embeds its input tokens with the target's) and its scale, and the post-final-norm hidden
  // state of every logits row of the last Forward ([rows, hidden] in the activation type, in
  // StepResult row order; valid until the next Forward).
  backend::Tensor embed_table() const;
  float embed_scale() const;
  backend::Tensor last_hidden(int rows) const;
  uint64_t weight_bytes() const override;
  int num_graphs() const;  // graphs recorded so far

  class Impl;

 private:
  explicit ModelRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gannet::runner
