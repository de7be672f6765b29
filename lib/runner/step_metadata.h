// Turns a host StepBatch into backend::StepMetadata: flattens token ids, positions, query starts,
// sequence lengths, per-group page tables and slot mappings into persistent backend buffers
// (allocated once for the runner's limits, so steps never allocate and CUDA graphs can replay
// over the same addresses), and validates the batch against those limits and the model.
#pragma once

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/kv/kv_layout.h"
#include "lib/model/config.h"
#include "lib/runner/step.h"

namespace gannet::runner {

struct RunnerOptions;

class StepMetadataBuilder {
 public:
  absl::Status Init(backend::Backend* backend, const model::ModelConfig& config,
                    const RunnerOptions& options);
  // The pools page ids are checked against (storage pages: managed + padding). Build fails
  // until it is set.
  void SetKvLayout(const kv::KvLayout& layout);
  // Validates and uploads; the returned metadata stays valid until the next Build. It is mutable
  // so the caller can adjust host-side bounds before launch (graph buckets round max_seq_len up).
  absl::StatusOr<backend::StepMetadata*> Build(const StepBatch& batch);

  // Uploads one sampling::DrawParams and one row of banned token ids (-1 padded) per logits row
  // (device sampling), in one copy. `banned` is empty or has one entry per row.
  absl::Status UploadSampling(const std::vector<sampling::DrawParams>& params,
                              const std::vector<std::span<const int32_t>>& banned);
  backend::Tensor sampling_params(int rows) const {
    return sampling_.Rows(0, rows * static_cast<int64_t>(sizeof(sampling::DrawParams)));
  }
  // [rows, kSampleBanSlots] int32, right after the rows' DrawParams.
  backend::Tensor banned_ids(int rows) const {
    return backend::Tensor::Make(
        static_cast<uint8_t*>(sampling_.data) + rows * sizeof(sampling::DrawParams), DType::kI32,
        {rows, backend::kSampleBanSlots});
  }
  backend::Tensor sampled_ids(int rows) const { return sampled_.Rows(0, rows); }
  // Token ids as rows of the rank's embedding shard (-1: another rank's); the ids themselves
  // without tensor parallelism.
  backend::Tensor token_ids(int n) const { return ids_.Rows(0, n); }
  backend::Tensor ple_token_ids(int n) const { return ple_ids_.Rows(0, n); }
  int num_logit_rows() const { return static_cast<int>(h_logit_rows_.size()); }
  backend::Tensor logit_rows(int n) const { return logit_rows_.Rows(0, n); }
  const std::vector<int32_t>& logit_row_seq() const { return h_logit_seq_; }
  const std::vector<int32_t>& logit_row_pos() const { return h_logit_pos_; }
  // A run of consecutive step tokens whose embeddings come from SeqStep::image_embeds.
  struct EmbedRun {
    int32_t first_token = 0;  // index into the step's tokens
    int32_t count = 0;
    const float* rows = nullptr;  // [count, hidden_size] host f32
  };
  const std::vector<EmbedRun>& embed_runs() const { return embed_runs_; }

 private:
  // The image block ids of one sequence: one per token, each block a single run.
  static absl::Status CheckImageBlockRuns(int s, const SeqStep& seq);
  // Checks seq.image_embeds against its image tokens and appends its runs (tokens from t0).
  absl::Status AddEmbedRuns(int s, const SeqStep& seq, int t0);

  backend::Backend* be_ = nullptr;
  int64_t vocab_ = 0;
  int64_t vocab_begin_ = 0, vocab_end_ = 0;  // the rank's embedding rows (tensor parallel)
  int64_t ple_vocab_ = 0;
  int32_t pad_token_ = 0;
  int64_t hidden_ = 0;
  int64_t max_positions_ = 0;
  int window_ = 0;
  bool image_blocks_ = false;  // the model attends bidirectionally within image blocks
  int max_tokens_ = 0, max_seqs_ = 0, max_rows_ = 0, max_pages_ = 0, page_size_ = 0;
  int64_t num_pages_[2] = {0, 0};  // storage pages per group (managed + padding)
  bool have_layout_ = false;
  bool group_used_[2] = {false, false};
  std::vector<backend::Buffer> buffers_;
  backend::Tensor ids_, ple_ids_, positions_, query_start_, seq_lens_, token_seq_, image_block_;
  backend::Tensor page_table_[2], slots_[2], logit_rows_, sampling_, sampled_;
  std::vector<int32_t> h_ids_, h_ple_ids_, h_positions_, h_query_start_, h_seq_lens_, h_token_seq_,
      h_image_block_;
  std::vector<int32_t> h_page_table_[2], h_slots_[2], h_logit_rows_, h_logit_seq_, h_logit_pos_;
  std::vector<uint8_t> h_sampling_;
  std::vector<EmbedRun> embed_runs_;
  backend::StepMetadata md_;
};

}  // namespace gannet::runner
