// KvManager's debug side: pre-launch read validation (GANNET_DEBUG_KV=1) and the global
// invariant check used by tests. Both only read state.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "lib/common/status.h"
#include "lib/kv/kv_manager.h"

namespace gannet::kv {
namespace {

std::string_view StateName(const PagePool& pool, int32_t page) {
  if (page == kNoPage) return "hole";
  if (!pool.InRange(page)) return "out of range";
  switch (pool.state(page)) {
    case PageState::kFree:
      return "free";
    case PageState::kCached:
      return "cached, unreferenced";
    case PageState::kOwned:
      return "owned";
  }
  return "?";
}

// "table[8..16) = [-1, -1, 17, 4, ...]" around block b, for error dumps.
std::string TableAround(const std::vector<int32_t>& table, int64_t b) {
  const int64_t lo = std::max<int64_t>(0, b - 4);
  const int64_t hi = std::min<int64_t>(static_cast<int64_t>(table.size()), b + 5);
  return fmt::format("table[{}..{}) = [{}]", lo, hi,
                     fmt::join(table.begin() + lo, table.begin() + hi, ", "));
}

}  // namespace

absl::Status KvManager::ValidateRead(int64_t seq_id, KvGroup group, int64_t first_pos,
                                     int64_t last_pos) const {
  GANNET_ASSIGN_OR_RETURN(const Sequence* seq, Find(seq_id));
  if (!has_group(group)) {
    return InvalidArgumentError("kv debug: the model has no {} KV group", KvGroupName(group));
  }
  if (first_pos < 0 || last_pos < first_pos || last_pos >= seq->length) {
    return InternalError(
        "kv debug: sequence {} reads {} positions [{}, {}] but has length {} (sliding pages "
        "kept from {})",
        seq_id, KvGroupName(group), first_pos, last_pos, seq->length, seq->keep_from);
  }
  const PagePool& pool = pools_[GroupIndex(group)];
  const std::vector<int32_t>& table = seq->table[GroupIndex(group)];
  for (int64_t b = first_pos / page_size_; b <= last_pos / page_size_; ++b) {
    const int32_t page = table[b];
    if (page != kNoPage && pool.InRange(page) && pool.state(page) == PageState::kOwned) continue;
    return InternalError(
        "kv debug: sequence {} reads {} position {} (block {}) -> page {} ({}); length {}, "
        "sliding pages kept from {}, pool capacity {}; {}",
        seq_id, KvGroupName(group), std::max(first_pos, b * page_size_), b, page,
        StateName(pool, page), seq->length, seq->keep_from, pool.capacity(), TableAround(table, b));
  }
  return absl::OkStatus();
}

absl::Status KvManager::CheckInvariants() const {
  PerGroup<std::vector<int32_t>> refs;
  for (KvGroup g : kAllKvGroups) {
    GANNET_RETURN_IF_ERROR(Annotate(pools_[GroupIndex(g)].CheckConsistency(),
                                    fmt::format("kv {} pool", KvGroupName(g))));
    refs[GroupIndex(g)].assign(pools_[GroupIndex(g)].capacity(), 0);
  }
  std::vector<int32_t> seq_refs(cache_->num_slots(), 0);
  std::vector<std::pair<KvGroup, int32_t>> partial_pages;
  for (const auto& [id, seq] : seqs_) {
    const int64_t blocks = NumBlocks(seq.length);
    const int64_t keep_limit =
        has_group(KvGroup::kSliding) ? std::max<int64_t>(0, seq.length - window_ + 1) : 0;
    if (seq.keep_from < 0 || seq.keep_from > keep_limit) {
      return InternalError("kv: sequence {} keeps sliding pages from {}, limit {}", id,
                           seq.keep_from, keep_limit);
    }
    for (KvGroup g : kAllKvGroups) {
      const int gi = GroupIndex(g);
      const std::vector<int32_t>& table = seq.table[gi];
      const int64_t want_size = has_group(g) ? blocks : 0;
      if (static_cast<int64_t>(table.size()) != want_size) {
        return InternalError("kv: sequence {} has {} {} table entries for length {}", id,
                             table.size(), KvGroupName(g), seq.length);
      }
      const int64_t holes = g == KvGroup::kSliding ? seq.keep_from / page_size_ : 0;
      for (int64_t b = 0; b < want_size; ++b) {
        const int32_t page = table[b];
        if ((page == kNoPage) != (b < holes)) {
          return InternalError("kv: sequence {} {} block {} -> page {}, but holes are [0, {})", id,
                               KvGroupName(g), b, page, holes);
        }
        if (page == kNoPage) continue;
        const PagePool& pool = pools_[gi];
        if (!pool.InRange(page) || pool.state(page) != PageState::kOwned) {
          return InternalError("kv: sequence {} {} block {} -> page {} ({})", id, KvGroupName(g), b,
                               page, StateName(pool, page));
        }
        ++refs[gi][page];
        const int32_t tag = pool.cache_tag(page);
        if (tag >= 0 && (!cache_->in_use(tag) || cache_->block(tag) != b)) {
          return InternalError("kv: sequence {} {} block {} -> page {} cached as another block", id,
                               KvGroupName(g), b, page);
        }
      }
      if (seq.length % page_size_ != 0 && has_group(g)) {
        partial_pages.emplace_back(g, table[blocks - 1]);
      }
    }
    if (seq.committed_blocks < 0 || seq.committed_blocks > seq.length / page_size_ ||
        (seq.committed_blocks > 0) != (seq.last_entry >= 0)) {
      return InternalError("kv: sequence {} has {} committed blocks (length {}), last entry {}", id,
                           seq.committed_blocks, seq.length, seq.last_entry);
    }
    if (seq.last_entry >= 0) {
      if (!cache_->in_use(seq.last_entry) ||
          cache_->block(seq.last_entry) != seq.committed_blocks - 1) {
        return InternalError("kv: sequence {} last committed entry {} is not block {}", id,
                             seq.last_entry, seq.committed_blocks - 1);
      }
      ++seq_refs[seq.last_entry];
    }
  }
  for (KvGroup g : kAllKvGroups) {
    const PagePool& pool = pools_[GroupIndex(g)];
    for (int32_t page = 0; page < pool.capacity(); ++page) {
      if (pool.refcount(page) != refs[GroupIndex(g)][page] + pool.pins(page)) {
        return InternalError("kv: {} page {} has refcount {} but {} table references + {} pins",
                             KvGroupName(g), page, pool.refcount(page), refs[GroupIndex(g)][page],
                             pool.pins(page));
      }
    }
  }
  // The page a sequence writes next must be its alone and not stand for a cached block.
  for (const auto& [g, page] : partial_pages) {
    const PagePool& pool = pools_[GroupIndex(g)];
    if (refs[GroupIndex(g)][page] != 1 || pool.cache_tag(page) >= 0) {
      return InternalError("kv: partial {} page {} is shared ({} tables) or cached (tag {})",
                           KvGroupName(g), page, refs[GroupIndex(g)][page], pool.cache_tag(page));
    }
  }
  return Annotate(cache_->CheckConsistency(seq_refs), "kv prefix cache");
}

}  // namespace gannet::kv
