#include "lib/runner/step_metadata.h"

#include <algorithm>
#include <cstring>

#include "lib/common/image_blocks.h"
#include "lib/common/status.h"
#include "lib/runner/model_runner.h"

namespace gannet::runner {

absl::Status StepMetadataBuilder::Init(backend::Backend* be, const model::ModelConfig& config,
                                       const RunnerOptions& o) {
  be_ = be;
  const model::TextConfig& c = config.text;
  vocab_ = c.vocab_size;
  // A tensor-parallel rank embeds only its vocabulary shard: other ids become -1 (a zero row,
  // which the all-reduce after the embedding fills from the rank that holds it).
  if (o.tp != nullptr) {
    const int64_t shard = vocab_ / o.tp->world_size();
    vocab_begin_ = shard * o.tp->rank();
    vocab_end_ = vocab_begin_ + shard;
  } else {
    vocab_begin_ = 0;
    vocab_end_ = vocab_;
  }
  ple_vocab_ = c.has_ple() ? c.vocab_size_per_layer_input : 0;
  pad_token_ = c.pad_token_id;
  hidden_ = c.hidden_size;
  max_positions_ = c.max_position_embeddings;
  window_ = c.sliding_window;
  // "all" (every layer bidirectional) is refused when the config is read (model/config.cc).
  image_blocks_ = c.use_bidirectional_attention == "vision";
  max_tokens_ = o.max_tokens;
  max_seqs_ = o.max_seqs;
  max_rows_ = o.max_logit_rows;
  max_pages_ = o.max_pages_per_seq;
  page_size_ = o.page_size;
  for (int l = 0; l < c.num_hidden_layers; ++l) group_used_[c.is_sliding(l) ? 0 : 1] = true;
  auto alloc = [&](backend::Tensor* t, int64_t n) -> absl::Status {
    GANNET_ASSIGN_OR_RETURN(backend::Buffer b, be->Allocate(static_cast<size_t>(n) * 4));
    *t = b.View(DType::kI32, {n});
    buffers_.push_back(std::move(b));
    return absl::OkStatus();
  };
  GANNET_RETURN_IF_ERROR(alloc(&ids_, max_tokens_));
  GANNET_RETURN_IF_ERROR(alloc(&ple_ids_, max_tokens_));
  GANNET_RETURN_IF_ERROR(alloc(&positions_, max_tokens_));
  GANNET_RETURN_IF_ERROR(alloc(&token_seq_, max_tokens_));
  if (image_blocks_) GANNET_RETURN_IF_ERROR(alloc(&image_block_, max_tokens_));
  GANNET_RETURN_IF_ERROR(alloc(&query_start_, max_seqs_ + 1));
  GANNET_RETURN_IF_ERROR(alloc(&seq_lens_, max_seqs_));
  GANNET_RETURN_IF_ERROR(alloc(&logit_rows_, max_rows_));
  for (int g = 0; g < 2; ++g) {
    GANNET_RETURN_IF_ERROR(alloc(&page_table_[g], static_cast<int64_t>(max_seqs_) * max_pages_));
    GANNET_RETURN_IF_ERROR(alloc(&slots_[g], max_tokens_));
  }
  GANNET_RETURN_IF_ERROR(alloc(&sampled_, max_rows_));
  const int64_t sp_bytes =
      static_cast<int64_t>(max_rows_) *
      (sizeof(sampling::DrawParams) + backend::kSampleBanSlots * sizeof(int32_t));
  GANNET_ASSIGN_OR_RETURN(backend::Buffer b, be->Allocate(static_cast<size_t>(sp_bytes)));
  sampling_ = b.View(DType::kU8, {sp_bytes});
  buffers_.push_back(std::move(b));
  return absl::OkStatus();
}

void StepMetadataBuilder::SetKvLayout(const kv::KvLayout& layout) {
  for (kv::KvGroup g : kv::kAllKvGroups) num_pages_[kv::GroupIndex(g)] = layout.storage_pages(g);
  have_layout_ = true;
}

absl::Status StepMetadataBuilder::UploadSampling(
    const std::vector<sampling::DrawParams>& p,
    const std::vector<std::span<const int32_t>>& banned) {
  const size_t rows = p.size();
  if (static_cast<int>(rows) > max_rows_) {
    return InvalidArgumentError("step: {} sampling rows exceed the runner limit of {}", rows,
                                max_rows_);
  }
  if (!banned.empty() && banned.size() != rows) {
    return InvalidArgumentError("step: {} banned-token lists for {} sampling rows", banned.size(),
                                rows);
  }
  const size_t params_bytes = rows * sizeof(sampling::DrawParams);
  h_sampling_.resize(params_bytes + rows * backend::kSampleBanSlots * sizeof(int32_t));
  std::memcpy(h_sampling_.data(), p.data(), params_bytes);
  auto* ban = reinterpret_cast<int32_t*>(h_sampling_.data() + params_bytes);
  std::fill(ban, ban + rows * backend::kSampleBanSlots, -1);
  for (size_t r = 0; r < banned.size(); ++r) {
    if (banned[r].size() > static_cast<size_t>(backend::kSampleBanSlots)) {
      return InvalidArgumentError("step: row {} bans {} tokens; device sampling takes at most {}",
                                  r, banned[r].size(), backend::kSampleBanSlots);
    }
    for (size_t k = 0; k < banned[r].size(); ++k) {
      const int32_t id = banned[r][k];
      if (id < 0 || id >= vocab_) {
        return InvalidArgumentError("step: row {} bans token {} outside the vocabulary of {}", r,
                                    id, vocab_);
      }
      ban[r * backend::kSampleBanSlots + k] = id;
    }
  }
  return be_->CopyToDevice(sampling_.data, h_sampling_.data(), h_sampling_.size());
}

absl::Status StepMetadataBuilder::CheckImageBlockRuns(int s, const SeqStep& seq) {
  if (seq.image_block.size() != seq.tokens.size()) {
    return InvalidArgumentError("step: sequence {} has {} image block ids for {} tokens", s,
                                seq.image_block.size(), seq.tokens.size());
  }
  // Each block is one run of positions, and a step holds a block whole except that its first
  // token may continue a block begun by KV already computed (a prefix-cache hit inside a block).
  int32_t prev = kTextBlock;
  std::vector<int32_t> seen;
  for (size_t i = 0; i < seq.image_block.size(); ++i) {
    const int32_t b = seq.image_block[i];
    if (b < kTextBlock) {
      return InvalidArgumentError("step: sequence {} token {} has image block id {}", s, i, b);
    }
    if (b >= 0 && b != prev) {
      if (std::find(seen.begin(), seen.end(), b) != seen.end()) {
        return InvalidArgumentError(
            "step: sequence {} image block {} is not one run of positions (again at token {})", s,
            b, i);
      }
      seen.push_back(b);
    }
    prev = b;
  }
  return absl::OkStatus();
}

absl::Status StepMetadataBuilder::AddEmbedRuns(int s, const SeqStep& seq, int t0) {
  if (seq.image_embeds.empty()) return absl::OkStatus();
  const int64_t images = std::count_if(seq.image_block.begin(), seq.image_block.end(),
                                       [](int32_t b) { return b >= 0; });
  if (static_cast<int64_t>(seq.image_embeds.size()) != images * hidden_) {
    return InvalidArgumentError(
        "step: sequence {} has {} image embedding values for {} image tokens of width {}", s,
        seq.image_embeds.size(), images, hidden_);
  }
  const float* next = seq.image_embeds.data();
  for (size_t i = 0; i < seq.image_block.size();) {
    if (seq.image_block[i] < 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < seq.image_block.size() && seq.image_block[j] >= 0) ++j;
    embed_runs_.push_back({t0 + static_cast<int32_t>(i), static_cast<int32_t>(j - i), next});
    next += static_cast<int64_t>(j - i) * hidden_;
    i = j;
  }
  return absl::OkStatus();
}

absl::StatusOr<backend::StepMetadata*> StepMetadataBuilder::Build(const StepBatch& batch) {
  if (!have_layout_) return FailedPreconditionError("step: the runner has no KV layout");
  if (batch.seqs.empty()) return InvalidArgumentError("step: no sequences");
  if (batch.seqs.size() > static_cast<size_t>(max_seqs_)) {
    return InvalidArgumentError("step: {} sequences exceed the runner limit of {}",
                                batch.seqs.size(), max_seqs_);
  }
  if (batch.num_tokens() > max_tokens_) {
    return InvalidArgumentError("step: {} tokens exceed the runner limit of {}", batch.num_tokens(),
                                max_tokens_);
  }
  const int num_seqs = static_cast<int>(batch.seqs.size());
  const int n = static_cast<int>(batch.num_tokens());
  h_ids_.assign(n, 0);
  h_ple_ids_.assign(n, 0);
  h_positions_.assign(n, 0);
  h_token_seq_.assign(n, 0);
  h_image_block_.assign(image_blocks_ ? n : 0, kTextBlock);
  bool any_image = false;
  h_query_start_.assign(num_seqs + 1, 0);
  h_seq_lens_.assign(num_seqs, 0);
  h_logit_rows_.clear();
  h_logit_seq_.clear();
  h_logit_pos_.clear();
  embed_runs_.clear();
  for (int g = 0; g < 2; ++g) {
    h_page_table_[g].assign(static_cast<size_t>(num_seqs) * max_pages_, -1);
    h_slots_[g].assign(n, -1);
  }
  int t = 0;
  int max_q = 0, max_len = 0;
  for (int s = 0; s < num_seqs; ++s) {
    const SeqStep& seq = batch.seqs[s];
    const int q = static_cast<int>(seq.tokens.size());
    if (q == 0) return InvalidArgumentError("step: sequence {} has no tokens", s);
    if (seq.start_pos < 0)
      return InvalidArgumentError("step: sequence {} starts at {}", s, seq.start_pos);
    const int64_t end = static_cast<int64_t>(seq.start_pos) + q;
    if (end > max_positions_) {
      return InvalidArgumentError(
          "step: sequence {} reaches position {}, beyond max_position_embeddings {}", s, end - 1,
          max_positions_);
    }
    if ((end + page_size_ - 1) / page_size_ > max_pages_) {
      return InvalidArgumentError("step: sequence {} needs {} pages, beyond the table width {}", s,
                                  (end + page_size_ - 1) / page_size_, max_pages_);
    }
    for (int g = 0; g < 2; ++g) {
      if (!group_used_[g]) continue;
      const auto& table = seq.page_table[g];
      if (static_cast<int64_t>(table.size()) > max_pages_) {
        return InvalidArgumentError("step: sequence {} page table has {} entries (limit {})", s,
                                    table.size(), max_pages_);
      }
      std::copy(table.begin(), table.end(),
                h_page_table_[g].begin() + static_cast<int64_t>(s) * max_pages_);
    }
    if (!seq.image_embeds.empty() && seq.image_block.empty()) {
      return InvalidArgumentError("step: sequence {} has image embeddings but no image tokens", s);
    }
    if (!seq.image_block.empty()) {
      GANNET_RETURN_IF_ERROR(CheckImageBlockRuns(s, seq));
      GANNET_RETURN_IF_ERROR(AddEmbedRuns(s, seq, t));
      // Models without bidirectional image attention read image tokens causally, like text.
      if (image_blocks_) {
        std::copy(seq.image_block.begin(), seq.image_block.end(), h_image_block_.begin() + t);
        any_image |= std::any_of(seq.image_block.begin(), seq.image_block.end(),
                                 [](int32_t b) { return b >= 0; });
      }
    }
    h_query_start_[s] = t;
    h_seq_lens_[s] = static_cast<int32_t>(end);
    max_q = std::max(max_q, q);
    max_len = std::max<int>(max_len, static_cast<int>(end));
    for (int i = 0; i < q; ++i, ++t) {
      const int32_t id = seq.tokens[i];
      if (id < 0 || id >= vocab_) {
        return InvalidArgumentError(
            "step: sequence {} token {} (id {}) is outside the vocabulary [0, {})", s, i, id,
            vocab_);
      }
      const int32_t pos = seq.start_pos + i;
      h_ids_[t] =
          id >= vocab_begin_ && id < vocab_end_ ? id - static_cast<int32_t>(vocab_begin_) : -1;
      // PLE tables may be smaller than the vocabulary; like vLLM, map other ids to 0.
      h_ple_ids_[t] = id < ple_vocab_ ? id : 0;
      // An image soft token's PLE token part is the pad token's (HF replaces its id by pad).
      if (!seq.image_embeds.empty() && seq.image_block[i] >= 0) h_ple_ids_[t] = pad_token_;
      h_positions_[t] = pos;
      h_token_seq_[t] = s;
      for (int g = 0; g < 2; ++g) {
        if (!group_used_[g]) continue;
        const auto& table = seq.page_table[g];
        const size_t col = static_cast<size_t>(pos / page_size_);
        const int32_t page = col < table.size() ? table[col] : -1;
        if (page < 0 || page >= num_pages_[g]) {
          return InvalidArgumentError(
              "step: sequence {} position {} has no valid {} page (entry {} = {}, pool {})", s, pos,
              g == 0 ? "sliding" : "full", col, page, num_pages_[g]);
        }
        // < kMaxPoolTokens: the layout keeps every stored page's slots within int32.
        h_slots_[g][t] =
            static_cast<int32_t>(static_cast<int64_t>(page) * page_size_ + pos % page_size_);
      }
    }
    if (seq.logits != SeqStep::Logits::kNone) {
      const int first = seq.logits == SeqStep::Logits::kAll ? 0 : q - 1;
      for (int i = first; i < q; ++i) {
        h_logit_rows_.push_back(h_query_start_[s] + i);
        h_logit_seq_.push_back(s);
        h_logit_pos_.push_back(seq.start_pos + i);
      }
    }
  }
  h_query_start_[num_seqs] = n;
  if (static_cast<int>(h_logit_rows_.size()) > max_rows_) {
    return InvalidArgumentError("step: {} logits rows exceed the runner limit of {}",
                                h_logit_rows_.size(), max_rows_);
  }
  auto up = [&](const backend::Tensor& dst, const std::vector<int32_t>& src) {
    return be_->CopyToDevice(dst.data, src.data(), src.size() * sizeof(int32_t));
  };
  GANNET_RETURN_IF_ERROR(up(ids_, h_ids_));
  GANNET_RETURN_IF_ERROR(up(ple_ids_, h_ple_ids_));
  GANNET_RETURN_IF_ERROR(up(positions_, h_positions_));
  GANNET_RETURN_IF_ERROR(up(token_seq_, h_token_seq_));
  if (any_image) GANNET_RETURN_IF_ERROR(up(image_block_, h_image_block_));
  GANNET_RETURN_IF_ERROR(up(query_start_, h_query_start_));
  GANNET_RETURN_IF_ERROR(up(seq_lens_, h_seq_lens_));
  GANNET_RETURN_IF_ERROR(up(logit_rows_, h_logit_rows_));
  for (int g = 0; g < 2; ++g) {
    GANNET_RETURN_IF_ERROR(up(page_table_[g], h_page_table_[g]));
    GANNET_RETURN_IF_ERROR(up(slots_[g], h_slots_[g]));
  }
  md_ = backend::StepMetadata();
  md_.num_seqs = num_seqs;
  md_.num_tokens = n;
  md_.max_query_len = max_q;
  md_.max_seq_len = max_len;
  md_.query_start = query_start_.as<int32_t>();
  md_.seq_lens = seq_lens_.as<int32_t>();
  md_.positions = positions_.as<int32_t>();
  md_.token_seq = token_seq_.as<int32_t>();
  md_.host_query_start = h_query_start_.data();
  md_.host_seq_lens = h_seq_lens_.data();
  md_.host_positions = h_positions_.data();
  if (any_image) {
    md_.image_block = image_block_.as<int32_t>();
    md_.host_image_block = h_image_block_.data();
  }
  for (int g = 0; g < 2; ++g) {
    backend::KvGroupView& v = md_.groups[g];
    v.page_size = page_size_;
    v.num_pages = static_cast<int>(num_pages_[g]);
    v.max_pages_per_seq = max_pages_;
    v.page_table = page_table_[g].as<int32_t>();
    v.slot_mapping = slots_[g].as<int32_t>();
    v.host_page_table = h_page_table_[g].data();
    v.host_slot_mapping = h_slots_[g].data();
  }
  return &md_;
}

}  // namespace gannet::runner
