#include "lib/kv/kv_manager.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "lib/common/check.h"
#include "lib/common/status.h"

namespace gannet::kv {
namespace {

constexpr int kSliding = GroupIndex(KvGroup::kSliding);

}  // namespace

bool DebugKvFromEnv() {
  const char* value = std::getenv("GANNET_DEBUG_KV");
  return value != nullptr && std::string_view(value) == "1";
}

absl::StatusOr<std::unique_ptr<KvManager>> KvManager::Create(const KvLayout& layout,
                                                             const KvManagerOptions& options) {
  if (!layout.has_group(KvGroup::kSliding) && !layout.has_group(KvGroup::kFull)) {
    return InvalidArgumentError("kv: both KV pools are empty; at least one group needs pages");
  }
  if (layout.page_size < 1 || (layout.has_group(KvGroup::kSliding) && layout.sliding_window < 1)) {
    return InvalidArgumentError("kv: page size {} and window {} must be >= 1 (use MakeKvLayout)",
                                layout.page_size, layout.sliding_window);
  }
  return std::unique_ptr<KvManager>(new KvManager(layout, options));
}

KvManager::KvManager(const KvLayout& layout, const KvManagerOptions& options)
    : page_size_(layout.page_size),
      window_(layout.sliding_window),
      enable_prefix_cache_(options.enable_prefix_cache),
      debug_validate_(options.debug_validate),
      pools_{PagePool(layout.num_pages[0]), PagePool(layout.num_pages[1])} {
  PerGroup<PagePool*> pools;
  for (KvGroup g : kAllKvGroups) {
    pools[GroupIndex(g)] = has_group(g) ? &pools_[GroupIndex(g)] : nullptr;
  }
  cache_ = std::make_unique<PrefixCache>(page_size_, window_, pools, options.block_hash);
}

PoolUsage KvManager::Usage(KvGroup g) const {
  const PagePool& pool = pools_[GroupIndex(g)];
  return PoolUsage{pool.capacity(), pool.num_free(), pool.num_owned(), pool.num_cached()};
}

absl::StatusOr<KvManager::Sequence*> KvManager::Find(int64_t seq_id) {
  const auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return InvalidArgumentError("kv: unknown sequence {}", seq_id);
  return &it->second;
}

absl::StatusOr<const KvManager::Sequence*> KvManager::Find(int64_t seq_id) const {
  const auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return InvalidArgumentError("kv: unknown sequence {}", seq_id);
  return &it->second;
}

absl::Status KvManager::AddSequence(int64_t seq_id) {
  if (!seqs_.try_emplace(seq_id).second) {
    return InvalidArgumentError("kv: sequence {} already exists", seq_id);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> KvManager::Length(int64_t seq_id) const {
  GANNET_ASSIGN_OR_RETURN(const Sequence* seq, Find(seq_id));
  return seq->length;
}

absl::StatusOr<PerGroup<int64_t>> KvManager::PagesNeeded(int64_t seq_id, int64_t new_len) const {
  GANNET_ASSIGN_OR_RETURN(const Sequence* seq, Find(seq_id));
  if (new_len < 0) return InvalidArgumentError("kv: negative length {}", new_len);
  const int64_t blocks = std::max<int64_t>(0, NumBlocks(new_len) - NumBlocks(seq->length));
  PerGroup<int64_t> need = {0, 0};
  for (KvGroup g : kAllKvGroups) need[GroupIndex(g)] = has_group(g) ? blocks : 0;
  return need;
}

absl::StatusOr<bool> KvManager::CanGrow(int64_t seq_id, int64_t new_len) const {
  GANNET_ASSIGN_OR_RETURN(const PerGroup<int64_t> need, PagesNeeded(seq_id, new_len));
  return CanAllocate(need);
}

bool KvManager::CanAllocate(const PerGroup<int64_t>& pages) const {
  for (KvGroup g : kAllKvGroups) {
    if (pages[GroupIndex(g)] > NumAvailablePages(g)) return false;
  }
  return true;
}

absl::Status KvManager::CheckAvailable(const PerGroup<int64_t>& pages, std::string_view what,
                                       int64_t seq_id, int64_t length, int64_t new_length) const {
  for (KvGroup g : kAllKvGroups) {
    const PagePool& pool = pools_[GroupIndex(g)];
    if (pages[GroupIndex(g)] > pool.num_available()) {
      return ResourceExhaustedError(
          "kv: {} sequence {} from {} to {} tokens needs {} {} pages but only {} are available "
          "({} free + {} cached of {})",
          what, seq_id, length, new_length, pages[GroupIndex(g)], KvGroupName(g),
          pool.num_available(), pool.num_free(), pool.num_cached(), pool.capacity());
    }
  }
  return absl::OkStatus();
}

int32_t KvManager::AllocatePage(KvGroup group) {
  PagePool& pool = pools_[GroupIndex(group)];
  if (pool.num_free() == 0) {
    const int32_t victim = pool.LruFront();
    GANNET_CHECK(victim >= 0);  // callers check availability first
    cache_->DropPage(group, victim);
    ++stats_.evictions[GroupIndex(group)];
  }
  return pool.Allocate();
}

absl::Status KvManager::Grow(int64_t seq_id, int64_t new_len) {
  GANNET_ASSIGN_OR_RETURN(Sequence * seq, Find(seq_id));
  if (new_len < 0) return InvalidArgumentError("kv: negative length {}", new_len);
  if (new_len <= seq->length) return absl::OkStatus();
  const int64_t old_blocks = NumBlocks(seq->length);
  const int64_t new_blocks = NumBlocks(new_len);
  PerGroup<int64_t> need = {0, 0};
  for (KvGroup g : kAllKvGroups) need[GroupIndex(g)] = has_group(g) ? new_blocks - old_blocks : 0;
  GANNET_RETURN_IF_ERROR(CheckAvailable(need, "growing", seq_id, seq->length, new_len));
  for (KvGroup g : kAllKvGroups) {
    std::vector<int32_t>& table = seq->table[GroupIndex(g)];
    for (int64_t i = 0; i < need[GroupIndex(g)]; ++i) table.push_back(AllocatePage(g));
  }
  seq->length = new_len;
  return absl::OkStatus();
}

absl::Status KvManager::ReleaseSlidingBefore(int64_t seq_id, int64_t first_needed_pos) {
  GANNET_ASSIGN_OR_RETURN(Sequence * seq, Find(seq_id));
  if (!has_group(KvGroup::kSliding)) return absl::OkStatus();
  const int64_t limit = std::max<int64_t>(0, seq->length - window_ + 1);
  const int64_t keep = std::min(first_needed_pos, limit);
  if (keep <= seq->keep_from) return absl::OkStatus();
  std::vector<int32_t>& table = seq->table[kSliding];
  for (int64_t b = seq->keep_from / page_size_; b < keep / page_size_; ++b) {
    GANNET_CHECK(table[b] != kNoPage);
    pools_[kSliding].DecRef(table[b]);
    table[b] = kNoPage;
  }
  seq->keep_from = keep;
  return absl::OkStatus();
}

void KvManager::ReleaseAll(Sequence& seq) {
  for (KvGroup g : kAllKvGroups) {
    std::vector<int32_t>& table = seq.table[GroupIndex(g)];
    // Tail first: a chain's later blocks land nearer the LRU front and are evicted before the
    // blocks every longer hit depends on.
    for (auto it = table.rbegin(); it != table.rend(); ++it) {
      if (*it != kNoPage) pools_[GroupIndex(g)].DecRef(*it);
    }
    table.clear();
  }
  if (seq.last_entry >= 0) cache_->ReleaseSeqRef(seq.last_entry);
  seq.last_entry = -1;
}

absl::Status KvManager::Free(int64_t seq_id) {
  GANNET_ASSIGN_OR_RETURN(Sequence * seq, Find(seq_id));
  ReleaseAll(*seq);
  seqs_.erase(seq_id);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PageCopy>> KvManager::Truncate(int64_t seq_id, int64_t new_len) {
  GANNET_ASSIGN_OR_RETURN(Sequence * seq, Find(seq_id));
  if (new_len < 0 || new_len > seq->length) {
    return InvalidArgumentError("kv: cannot truncate sequence {} of length {} to {}", seq_id,
                                seq->length, new_len);
  }
  std::vector<PageCopy> copies;
  if (new_len == seq->length) return copies;
  if (has_group(KvGroup::kSliding) &&
      seq->keep_from > std::max<int64_t>(0, new_len - window_ + 1)) {
    return FailedPreconditionError(
        "kv: cannot truncate sequence {} to {} tokens: sliding pages before position {} were "
        "released and position {} needs them",
        seq_id, new_len, seq->keep_from, new_len);
  }
  const int64_t new_blocks = NumBlocks(new_len);
  const int64_t boundary = new_len % page_size_ != 0 ? new_len / page_size_ : -1;
  enum class Action { kNone, kUnregister, kCopy };
  PerGroup<Action> action = {Action::kNone, Action::kNone};
  PerGroup<int64_t> need = {0, 0};
  for (KvGroup g : kAllKvGroups) {
    const int gi = GroupIndex(g);
    if (!has_group(g) || boundary < 0) continue;
    const int32_t page = seq->table[gi][boundary];
    GANNET_CHECK(page != kNoPage);
    if (pools_[gi].refcount(page) > 1) {
      action[gi] = Action::kCopy;  // shared or pinned: someone else still reads it
      need[gi] = 1;
    } else if (pools_[gi].cache_tag(page) >= 0) {
      action[gi] = Action::kUnregister;  // ours alone: drop the cache block, write in place
    }
  }
  GANNET_RETURN_IF_ERROR(CheckAvailable(need, "truncating", seq_id, seq->length, new_len));
  // Full group first: dropping a full page from the cache also drops its entry's sliding page.
  for (KvGroup g : {KvGroup::kFull, KvGroup::kSliding}) {
    const int gi = GroupIndex(g);
    if (!has_group(g)) continue;
    std::vector<int32_t>& table = seq->table[gi];
    if (action[gi] == Action::kCopy) {
      const int32_t old_page = table[boundary];
      const int32_t new_page = AllocatePage(g);
      copies.push_back(PageCopy{g, old_page, new_page});
      table[boundary] = new_page;
      pools_[gi].DecRef(old_page);
    } else if (action[gi] == Action::kUnregister && pools_[gi].cache_tag(table[boundary]) >= 0) {
      cache_->DropPage(g, table[boundary]);
    }
    for (int64_t b = static_cast<int64_t>(table.size()) - 1; b >= new_blocks; --b) {
      if (table[b] != kNoPage) pools_[gi].DecRef(table[b]);
    }
    table.resize(new_blocks);
  }
  const int64_t new_committed = std::min(seq->committed_blocks, new_len / page_size_);
  int32_t entry = seq->last_entry;
  for (int64_t b = seq->committed_blocks; b > new_committed; --b) entry = cache_->parent(entry);
  if (entry != seq->last_entry) {
    if (entry >= 0) cache_->AddSeqRef(entry);
    cache_->ReleaseSeqRef(seq->last_entry);
    seq->last_entry = entry;
  }
  seq->committed_blocks = new_committed;
  seq->length = new_len;
  return copies;
}

absl::StatusOr<std::vector<PageCopy>> KvManager::Fork(int64_t src_seq_id, int64_t dst_seq_id) {
  if (HasSequence(dst_seq_id)) {
    return InvalidArgumentError("kv: fork target sequence {} already exists", dst_seq_id);
  }
  GANNET_ASSIGN_OR_RETURN(const Sequence* src, Find(src_seq_id));
  const int64_t partial = src->length % page_size_ != 0 ? src->length / page_size_ : -1;
  PerGroup<int64_t> need = {0, 0};
  for (KvGroup g : kAllKvGroups) need[GroupIndex(g)] = has_group(g) && partial >= 0 ? 1 : 0;
  GANNET_RETURN_IF_ERROR(CheckAvailable(need, "forking", src_seq_id, src->length, src->length));
  Sequence dst = *src;  // copied before inserting: insertion may move src
  std::vector<PageCopy> copies;
  for (KvGroup g : kAllKvGroups) {
    const int gi = GroupIndex(g);
    std::vector<int32_t>& table = dst.table[gi];
    for (int64_t b = 0; b < static_cast<int64_t>(table.size()); ++b) {
      if (table[b] == kNoPage) continue;
      if (b == partial) {
        // The source still holds this page, so allocation cannot evict it.
        const int32_t fresh = AllocatePage(g);
        copies.push_back(PageCopy{g, table[b], fresh});
        table[b] = fresh;
      } else {
        pools_[gi].IncRef(table[b]);
      }
    }
  }
  if (dst.last_entry >= 0) cache_->AddSeqRef(dst.last_entry);
  seqs_.emplace(dst_seq_id, std::move(dst));
  return copies;
}

absl::StatusOr<absl::Span<const int32_t>> KvManager::PageTable(int64_t seq_id,
                                                               KvGroup group) const {
  GANNET_ASSIGN_OR_RETURN(const Sequence* seq, Find(seq_id));
  return absl::MakeConstSpan(seq->table[GroupIndex(group)]);
}

absl::Status KvManager::CommitPages(int64_t seq_id, absl::Span<const int32_t> tokens,
                                    int64_t computed_len, absl::Span<const uint64_t> salts) {
  GANNET_ASSIGN_OR_RETURN(Sequence * seq, Find(seq_id));
  if (computed_len < 0 || computed_len > seq->length ||
      computed_len > static_cast<int64_t>(tokens.size())) {
    return InvalidArgumentError(
        "kv: commit of {} computed tokens for sequence {} (length {}, {} token ids given)",
        computed_len, seq_id, seq->length, tokens.size());
  }
  if (!enable_prefix_cache_) return absl::OkStatus();
  for (int64_t b = seq->committed_blocks; b < computed_len / page_size_; ++b) {
    const int32_t entry =
        cache_->FindOrCreate(seq->last_entry, tokens.subspan(b * page_size_, page_size_),
                             b < static_cast<int64_t>(salts.size()) ? salts[b] : 0);
    if (entry < 0) break;  // hash collision with another block: stop caching this chain
    // Full first: in hybrid models a sliding page only joins an entry that has its full page.
    for (KvGroup g : {KvGroup::kFull, KvGroup::kSliding}) {
      if (!has_group(g)) continue;
      const int32_t page = seq->table[GroupIndex(g)][b];
      if (page != kNoPage) cache_->TryAddPage(entry, g, page);
    }
    cache_->AddSeqRef(entry);
    if (seq->last_entry >= 0) cache_->ReleaseSeqRef(seq->last_entry);
    seq->last_entry = entry;
    seq->committed_blocks = b + 1;
  }
  return absl::OkStatus();
}

int64_t KvManager::MatchPrefix(absl::Span<const int32_t> tokens, int64_t max_len,
                               absl::Span<const uint64_t> salts) {
  ++stats_.prefix_lookups;
  stats_.prefix_queried_tokens +=
      std::clamp<int64_t>(max_len, 0, static_cast<int64_t>(tokens.size()));
  if (!enable_prefix_cache_) return 0;
  const int64_t hit = cache_->Match(tokens, max_len, &match_scratch_, salts);
  stats_.prefix_hit_tokens += hit;
  return hit;
}

absl::Status KvManager::AttachPrefix(int64_t seq_id, absl::Span<const int32_t> tokens, int64_t len,
                                     absl::Span<const uint64_t> salts) {
  GANNET_ASSIGN_OR_RETURN(Sequence * seq, Find(seq_id));
  if (seq->length != 0) {
    return InvalidArgumentError("kv: AttachPrefix needs an empty sequence; {} has length {}",
                                seq_id, seq->length);
  }
  if (len < 0 || len % page_size_ != 0 || len > static_cast<int64_t>(tokens.size())) {
    return InvalidArgumentError(
        "kv: prefix length {} must be a multiple of the page size {} and at most the {} tokens "
        "given",
        len, page_size_, tokens.size());
  }
  if (len == 0) return absl::OkStatus();
  const int64_t cached =
      enable_prefix_cache_ ? cache_->Match(tokens, len, &match_scratch_, salts) : 0;
  if (cached != len) {
    return FailedPreconditionError("kv: only {} of the {} prefix tokens are cached for sequence {}",
                                   cached, len, seq_id);
  }
  const int64_t blocks = len / page_size_;
  seq->keep_from = has_group(KvGroup::kSliding) ? std::max<int64_t>(0, len - window_) : 0;
  for (KvGroup g : kAllKvGroups) {
    const int gi = GroupIndex(g);
    if (!has_group(g)) continue;
    const int64_t holes = g == KvGroup::kSliding ? seq->keep_from / page_size_ : 0;
    std::vector<int32_t>& table = seq->table[gi];
    table.assign(blocks, kNoPage);
    for (int64_t b = holes; b < blocks; ++b) {
      const int32_t page = cache_->page(match_scratch_[b], g);
      GANNET_CHECK(page != kNoPage);  // Match guarantees these
      pools_[gi].IncRef(page);
      table[b] = page;
    }
  }
  seq->length = len;
  seq->committed_blocks = blocks;
  seq->last_entry = match_scratch_.back();
  cache_->AddSeqRef(seq->last_entry);
  return absl::OkStatus();
}

absl::Status KvManager::PinPage(KvGroup group, int32_t page) {
  PagePool& pool = pools_[GroupIndex(group)];
  if (!pool.InRange(page) || pool.state(page) == PageState::kFree) {
    return InvalidArgumentError("kv: cannot pin {} page {}: {}", KvGroupName(group), page,
                                pool.InRange(page) ? "it is free" : "out of range");
  }
  pool.Pin(page);
  return absl::OkStatus();
}

absl::Status KvManager::UnpinPage(KvGroup group, int32_t page) {
  PagePool& pool = pools_[GroupIndex(group)];
  if (!pool.InRange(page) || pool.pins(page) == 0) {
    return InvalidArgumentError("kv: {} page {} is not pinned", KvGroupName(group), page);
  }
  pool.Unpin(page);
  return absl::OkStatus();
}

}  // namespace gannet::kv
