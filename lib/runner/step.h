// The input and output of one forward step, in host memory.
//
// A step carries any mix of prefill chunks and decode tokens: each sequence contributes the tokens
// it computes this step, starting at `start_pos`, plus its page table per KV group. The runner
// turns this into backend metadata (StepMetadata).
//
// Logits rows (one per sequence asking for kLast, one per token for kAll, in sequence order) stay
// in backend memory unless asked for: with `device_sampling` set, every row is sampled on the
// backend (StepResult::sampled) and only the rows flagged in `host_logits` are copied to the host
// (requests that need penalties or logprobs); without it every row is copied. Banned tokens are
// masked to -inf in the logits before the draw, so copied rows show them masked too.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lib/backend/backend.h"

namespace gannet::runner {

struct SeqStep {
  std::span<const int32_t> tokens;  // the new tokens of this sequence
  int32_t start_pos = 0;            // position of tokens[0]; earlier positions are in the KV cache
  // Page table per KV group (0 sliding, 1 full): page ids for blocks 0.. of the sequence; -1 for
  // released sliding pages. Must cover every position this step writes or reads.
  std::span<const int32_t> page_table[2];
  enum class Logits : uint8_t { kNone, kLast, kAll };
  Logits logits = Logits::kLast;
  // Empty (all text), or the image block id of each of `tokens` (kTextBlock = -1 for text; k for
  // the k-th image of the sequence; lib/common/image_blocks.h). A block's tokens must all be in
  // this step: the prefill mask lets them attend to each other (docs/vision.md).
  std::span<const int32_t> image_block;
  // Empty, or the input embeddings of this step's image soft tokens (the tokens whose image_block
  // is >= 0): [count, hidden_size] f32, row-major in token order. They replace those tokens' text
  // embeddings as they are (no embedding scale), and the per-layer (PLE) token part of those
  // tokens uses the pad token, as HF does (docs/vision.md "Images in the engine").
  std::span<const float> image_embeds;
};

inline constexpr int kMaxUniformQueryLen = 16;

struct StepBatch {
  std::vector<SeqStep> seqs;
  std::vector<sampling::DrawParams> device_sampling;  // empty, or one per logits row
  std::vector<uint8_t> host_logits;                   // with device_sampling: rows to copy
  // With device_sampling: empty, or per row the token ids the draw must not pick (at most
  // backend::kSampleBanSlots; a request's stop tokens before min_tokens).
  std::vector<std::span<const int32_t>> banned_tokens;
  int64_t num_tokens() const;
  bool decode_only() const;  // every sequence computes exactly one token and wants its logits
  // q when every sequence computes q <= kMaxUniformQueryLen tokens and wants a logits row for each
  // (decode: q = 1; speculative verify chunks: q = K + 1); else 0. Such steps are padded to a
  // batch bucket and replayed from CUDA graphs.
  int uniform_query_len() const;
};

struct StepResult {
  int vocab_size = 0;
  std::vector<int32_t> row_seq;   // sequence index (into StepBatch::seqs) of each logits row
  std::vector<int32_t> row_pos;   // position of the token each row predicts from
  std::vector<int32_t> sampled;   // [rows] with device_sampling
  std::vector<float> logits;      // [host rows, vocab_size], after the final softcap
  std::vector<int32_t> host_row;  // [rows]: index into logits, or -1 when not copied
  int rows() const { return static_cast<int>(row_seq.size()); }
  bool has_logits(int r) const { return host_row[r] >= 0; }
  std::span<const float> Row(int r) const {
    return {logits.data() + static_cast<size_t>(host_row[r]) * vocab_size,
            static_cast<size_t>(vocab_size)};
  }
};

}  // namespace gannet::runner
