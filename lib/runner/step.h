// The input and output of one forward step, in host memory.
//
// A step carries any mix of prefill chunks and decode tokens: each sequence contributes the tokens
// it computes this step, starting at `start_pos`, plus its page table per KV group. The runner
// turns this into backend metadata (StepMetadata), so this header has no backend types.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace gannet::runner {

struct SeqStep {
  std::span<const int32_t> tokens;  // the new tokens of this sequence
  int32_t start_pos = 0;            // position of tokens[0]; earlier positions are in the KV cache
  // Page table per KV group (0 sliding, 1 full): page ids for blocks 0.. of the sequence; -1 for
  // released sliding pages. Must cover every position this step writes or reads.
  std::span<const int32_t> page_table[2];
  enum class Logits : uint8_t { kNone, kLast, kAll };
  Logits logits = Logits::kLast;
};

struct StepBatch {
  std::vector<SeqStep> seqs;
  int num_tokens() const;
};

struct StepResult {
  int vocab_size = 0;
  std::vector<float> logits;     // [rows, vocab_size], after the final softcap
  std::vector<int32_t> row_seq;  // sequence index (into StepBatch::seqs) of each logits row
  std::vector<int32_t> row_pos;  // position of the token each row predicts from
  int rows() const { return static_cast<int>(row_seq.size()); }
  std::span<const float> Row(int r) const {
    return {logits.data() + static_cast<size_t>(r) * vocab_size, static_cast<size_t>(vocab_size)};
  }
};

}  // namespace gannet::runner
