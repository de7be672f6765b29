// The MTP "assistant" drafter of a Gemma-4 target (docs/gemma4-model.md §3) over a Backend: it
// proposes the next tokens of running sequences from the target's last hidden state and the
// target's KV cache, which it reads and never writes.
//
// One draft step, for every sequence of a round (batched):
//   e = E_target[t] * scale_target;  z = W_pre [e, h];  x = z
//   4 decoder layers (3 sliding, 1 full; norms, Q-only attention, gated MLP, layer scalar), each
//     attending to the KV arrays of the target's last layer of its type that owns KV, through
//     the target's page tables;
//   s = RMS(x);  logits = E_draft s (E2B/E4B: only the tokens of the top clusters, others -inf;
//   no soft-cap, as in HF);
//   h_next = W_post s;  t_next = a draw from the logits.
// Step 1 takes the bonus token and the target's post-final-norm hidden state at the position
// that produced it; step k > 1 takes draft k-1 and h_next of step k-1.
//
// Positions (HF's reference convention, docs/gemma4-model.md §3.4): with L committed KV
// entries (positions 0 .. L-1), every draft query of the round is rotated at position L (the
// bonus token's), and attends to keys 0 .. L-1 (full layer) or the last W of them (sliding
// layers) -- exactly the committed keys, never a tentative one.
//
// Tensor parallelism: when the target runner is a rank of a group (RunnerOptions::tp),
// the drafter is that rank's shard of the assistant (model/tp_shard.h: its q heads read only the
// rank's KV heads) and meets the other ranks' drafters in the same collectives: after o_proj and
// the MLP (all-reduce), after the vocabulary-parallel embedding of its input tokens, and at the
// head (the ranks' arg-maxes exchanged, or the vocabulary shards gathered into full rows). Every
// rank draws the same tokens from the same rows; each step's tokens go through the host to
// become the next step's rank-local embedding ids, so such rounds run eagerly (no graphs).
//
// Owns the drafter's weights and scratch in backend memory; one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"
#include "lib/runner/model_runner.h"
#include "lib/runner/step_metadata.h"
#include "lib/sampling/draw.h"

namespace gannet::spec {

struct DrafterOptions {
  int max_seqs = 16;  // sequences per round
  int max_steps = 8;  // draft tokens per round (K)
  // Rounds whose rows all draw on the device (greedy) are padded to a batch bucket and replayed
  // from graphs on backends that have them.
  bool enable_graphs = true;
};

// One sequence of a drafting round.
struct DraftSeq {
  int32_t token = 0;       // input of step 1: the bonus token
  int32_t hidden_row = 0;  // the row of the target's last_hidden() holding h at its position
  int64_t committed = 0;   // L: KV positions 0 .. L-1 are committed
  std::span<const int32_t> page_table[2];  // the target's tables (sliding, full)
  // The draw of each step (temperature, filters, seed); greedy rows take the arg-max.
  std::vector<sampling::DrawParams> draws;  // one per step of the round
  // Copy every step's logits to the host and draw there (rejection sampling needs the exact
  // distribution each draft was drawn from).
  bool want_logits = false;
};

struct DraftResult {
  std::vector<std::vector<int32_t>> tokens;  // [seq][step]
  // [seq][step * vocab], after the cluster mask (filled for want_logits sequences only)
  std::vector<std::vector<float>> logits;
};

// What the engine's speculative decoder drafts with: one device's Drafter, or a tensor-parallel
// group's (parallel::TpRunner::AttachDrafter), which runs every rank's Drafter and returns rank
// 0's result.
class DraftRunner {
 public:
  virtual ~DraftRunner() = default;
  // Runs `steps` draft steps for every sequence, right after the target's Forward whose
  // last_hidden() rows the sequences name.
  virtual absl::Status Draft(std::span<const DraftSeq> seqs, int steps, DraftResult* result) = 0;
  virtual const model::ModelConfig& config() const = 0;
  // Bytes of weights, over all devices.
  virtual uint64_t weight_bytes() const = 0;
  // The device time of the rounds since the last call, where the runner measures it itself (a
  // group: rank 0's device, on the thread that drives it); Unavailable where the caller measures
  // it on its own device around Draft (one device).
  virtual absl::StatusOr<double> TakeDeviceSeconds() {
    return absl::UnavailableError("the caller measures the drafter's device time");
  }
};

class Drafter : public DraftRunner {
 public:
  // Checks that the drafter fits the target (backbone width, vocabulary, heads, KV heads, head
  // dims, window, layer types) and loads its weights. InvalidArgument naming the mismatch. The
  // target runner may get its KV storage later (before the first round).
  static absl::StatusOr<std::unique_ptr<Drafter>> Create(const model::ModelConfig& drafter,
                                                         const model::ModelWeights& weights,
                                                         const model::ModelConfig& target,
                                                         runner::ModelRunner* target_runner,
                                                         backend::Backend* backend,
                                                         const DrafterOptions& options);
  ~Drafter() override;

  absl::Status Draft(std::span<const DraftSeq> seqs, int steps, DraftResult* result) override;

  // Step 1 only, for tests: the drafter's logits [seqs, vocab] (after the cluster mask) and
  // h_next [seqs, backbone hidden], both on the host as f32.
  absl::Status FirstStep(std::span<const DraftSeq> seqs, std::vector<float>* logits,
                         std::vector<float>* next_hidden);

  const model::ModelConfig& config() const override;
  uint64_t weight_bytes() const override;

  class Impl;

 private:
  explicit Drafter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether `drafter` (a gemma4_assistant config) can draft for `target`: backbone width,
// vocabulary, window, every layer KV-shared onto a target layer of its type with the same KV
// heads and head dim, a centroid head that divides the vocabulary. InvalidArgument naming the
// mismatch.
absl::Status CheckDrafterPair(const model::ModelConfig& drafter, const model::ModelConfig& target);

// The target layer whose KV a drafter layer of this type reads: the target's last layer of that
// type that owns KV; -1 if there is none.
int DrafterKvSource(const model::TextConfig& target, model::LayerType type);

}  // namespace gannet::spec
