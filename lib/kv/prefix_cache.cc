#include "lib/kv/prefix_cache.h"

#include <algorithm>

#include "lib/common/check.h"
#include "lib/common/status.h"

namespace gannet::kv {
namespace {

// The parent hash of block 0 (arbitrary non-zero constant: the fractional digits of sqrt(2)).
constexpr uint64_t kRootHash = 0x6a09e667f3bcc908ULL;

// MurmurHash3's 64-bit finalizer: a full avalanche per token keeps the chain hash well spread.
uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

}  // namespace

uint64_t DefaultBlockHash(uint64_t parent_hash, absl::Span<const int32_t> block_tokens) {
  uint64_t h = Mix64(parent_hash ^ 0x9e3779b97f4a7c15ULL);
  for (int32_t t : block_tokens) h = Mix64(h + static_cast<uint32_t>(t));
  return h;
}

PrefixCache::PrefixCache(int32_t page_size, int32_t sliding_window, PerGroup<PagePool*> pools,
                         BlockHashFn hash)
    : page_size_(page_size),
      window_(sliding_window),
      pools_(pools),
      hash_(hash != nullptr ? hash : &DefaultBlockHash) {}

uint64_t PrefixCache::KeyHash(uint64_t parent_hash, absl::Span<const int32_t> tokens,
                              uint64_t salt) const {
  const uint64_t h = hash_(parent_hash, tokens);
  return salt == 0 ? h : Mix64(h ^ Mix64(salt));
}

int64_t PrefixCache::Match(absl::Span<const int32_t> tokens, int64_t max_len,
                           std::vector<int32_t>* entries, absl::Span<const uint64_t> salts) const {
  entries->clear();
  const int64_t limit = std::min<int64_t>(std::max<int64_t>(max_len, 0), tokens.size());
  const int64_t max_blocks = limit / page_size_;
  const bool need_full = HasGroup(KvGroup::kFull);
  uint64_t hash = kRootHash;
  int32_t parent = -1;
  for (int64_t b = 0; b < max_blocks; ++b) {
    const absl::Span<const int32_t> block = tokens.subspan(b * page_size_, page_size_);
    const uint64_t salt = b < static_cast<int64_t>(salts.size()) ? salts[b] : 0;
    hash = KeyHash(hash, block, salt);
    const auto it = index_.find(hash);
    if (it == index_.end()) break;
    const int32_t e = it->second;
    const absl::Span<const int32_t> cached = Tokens(e);
    if (entries_[e].parent != parent || entries_[e].salt != salt ||
        !std::equal(block.begin(), block.end(), cached.begin())) {
      break;  // a hash collision: the chain stops being provably ours here
    }
    if (need_full && entries_[e].page[GroupIndex(KvGroup::kFull)] == kNoPage) break;
    entries->push_back(e);
    parent = e;
  }
  int64_t usable = static_cast<int64_t>(entries->size());
  if (HasGroup(KvGroup::kSliding)) {
    // Largest k such that blocks [first(k), k) all have sliding pages, where first(k) is the
    // block of position max(0, kP - W). `run` counts consecutive such blocks ending at k - 1.
    const int64_t matched = usable;
    usable = 0;
    int64_t run = 0;
    for (int64_t k = 1; k <= matched; ++k) {
      run = page((*entries)[k - 1], KvGroup::kSliding) != kNoPage ? run + 1 : 0;
      const int64_t first = std::max<int64_t>(0, k * page_size_ - window_) / page_size_;
      if (run >= k - first) usable = k;
    }
  }
  entries->resize(usable);
  return usable * page_size_;
}

int32_t PrefixCache::FindOrCreate(int32_t parent, absl::Span<const int32_t> block_tokens,
                                  uint64_t salt) {
  GANNET_CHECK(static_cast<int32_t>(block_tokens.size()) == page_size_);
  const uint64_t parent_hash = parent < 0 ? kRootHash : entries_[parent].hash;
  const uint64_t hash = KeyHash(parent_hash, block_tokens, salt);
  const auto [it, inserted] = index_.try_emplace(hash, -1);
  if (!inserted) {
    const int32_t e = it->second;
    const absl::Span<const int32_t> cached = Tokens(e);
    const bool same = entries_[e].parent == parent && entries_[e].salt == salt &&
                      std::equal(block_tokens.begin(), block_tokens.end(), cached.begin());
    return same ? e : -1;
  }
  int32_t e;
  if (!free_slots_.empty()) {
    e = free_slots_.back();
    free_slots_.pop_back();
  } else {
    e = num_slots();
    entries_.emplace_back();
    tokens_.resize(tokens_.size() + page_size_);
  }
  it->second = e;
  Entry& entry = entries_[e];
  entry = Entry{};
  entry.hash = hash;
  entry.salt = salt;
  entry.parent = parent;
  entry.block = parent < 0 ? 0 : entries_[parent].block + 1;
  entry.in_use = true;
  std::copy(block_tokens.begin(), block_tokens.end(),
            tokens_.begin() + static_cast<size_t>(e) * page_size_);
  if (parent >= 0) ++entries_[parent].num_children;
  return e;
}

void PrefixCache::TryAddPage(int32_t entry, KvGroup group, int32_t page) {
  Entry& en = entries_[entry];
  const int gi = GroupIndex(group);
  PagePool& pool = *pools_[gi];
  if (en.page[gi] != kNoPage || pool.cache_tag(page) >= 0) return;
  if (Hybrid() && group == KvGroup::kSliding && en.page[GroupIndex(KvGroup::kFull)] == kNoPage) {
    return;
  }
  en.page[gi] = page;
  pool.SetCacheTag(page, entry);
}

void PrefixCache::DropPage(KvGroup group, int32_t page) {
  const int gi = GroupIndex(group);
  const int32_t e = pools_[gi]->cache_tag(page);
  GANNET_CHECK(e >= 0 && entries_[e].in_use && entries_[e].page[gi] == page);
  entries_[e].page[gi] = kNoPage;
  pools_[gi]->ClearCacheTag(page);
  if (Hybrid() && group == KvGroup::kFull) {
    const int si = GroupIndex(KvGroup::kSliding);
    const int32_t sliding_page = entries_[e].page[si];
    if (sliding_page != kNoPage) {
      entries_[e].page[si] = kNoPage;
      pools_[si]->ClearCacheTag(sliding_page);
    }
  }
  MaybeErase(e);
}

void PrefixCache::AddSeqRef(int32_t entry) {
  GANNET_CHECK(entries_[entry].in_use);
  ++entries_[entry].num_seq_refs;
}

void PrefixCache::ReleaseSeqRef(int32_t entry) {
  GANNET_CHECK(entries_[entry].in_use && entries_[entry].num_seq_refs > 0);
  --entries_[entry].num_seq_refs;
  MaybeErase(entry);
}

void PrefixCache::MaybeErase(int32_t e) {
  while (e >= 0) {
    Entry& en = entries_[e];
    if (en.page[0] != kNoPage || en.page[1] != kNoPage || en.num_children > 0 ||
        en.num_seq_refs > 0) {
      return;
    }
    const int32_t parent = en.parent;
    index_.erase(en.hash);
    en.in_use = false;
    free_slots_.push_back(e);
    if (parent >= 0) --entries_[parent].num_children;
    e = parent;
  }
}

absl::Status PrefixCache::CheckConsistency(const std::vector<int32_t>& seq_refs) const {
  std::vector<int32_t> children(entries_.size(), 0);
  int64_t live = 0;
  for (int32_t e = 0; e < num_slots(); ++e) {
    const Entry& en = entries_[e];
    if (!en.in_use) continue;
    ++live;
    const auto it = index_.find(en.hash);
    if (it == index_.end() || it->second != e) {
      return InternalError("cache entry {} is not indexed under its hash", e);
    }
    uint64_t parent_hash = kRootHash;
    if (en.parent >= 0) {
      const Entry& p = entries_[en.parent];
      if (!p.in_use || p.block != en.block - 1) {
        return InternalError("cache entry {} (block {}) has a bad parent {}", e, en.block,
                             en.parent);
      }
      parent_hash = p.hash;
      ++children[en.parent];
    } else if (en.block != 0) {
      return InternalError("cache entry {} has no parent but is block {}", e, en.block);
    }
    if (KeyHash(parent_hash, Tokens(e), en.salt) != en.hash) {
      return InternalError("cache entry {}: hash does not match its tokens", e);
    }
    const int32_t want_refs = e < static_cast<int32_t>(seq_refs.size()) ? seq_refs[e] : 0;
    if (en.num_seq_refs != want_refs) {
      return InternalError("cache entry {}: {} sequence refs recorded, {} actual", e,
                           en.num_seq_refs, want_refs);
    }
    for (KvGroup g : kAllKvGroups) {
      const int32_t page = en.page[GroupIndex(g)];
      if (page == kNoPage) continue;
      const PagePool* pool = pools_[GroupIndex(g)];
      if (pool == nullptr || !pool->InRange(page) || pool->cache_tag(page) != e ||
          pool->state(page) == PageState::kFree) {
        return InternalError("cache entry {}: {} page {} is not tagged to it or is free", e,
                             KvGroupName(g), page);
      }
    }
    if (Hybrid() && en.page[GroupIndex(KvGroup::kSliding)] != kNoPage &&
        en.page[GroupIndex(KvGroup::kFull)] == kNoPage) {
      return InternalError("cache entry {} holds a sliding page without its full page", e);
    }
  }
  for (int32_t e = 0; e < num_slots(); ++e) {
    const Entry& en = entries_[e];
    if (!en.in_use) continue;
    if (en.num_children != children[e]) {
      return InternalError("cache entry {}: {} children recorded, {} actual", e, en.num_children,
                           children[e]);
    }
    if (en.page[0] == kNoPage && en.page[1] == kNoPage && en.num_children == 0 &&
        en.num_seq_refs == 0) {
      return InternalError("cache entry {} holds nothing but was not erased", e);
    }
  }
  if (live != num_entries() || live + static_cast<int64_t>(free_slots_.size()) != num_slots()) {
    return InternalError("cache has {} live entries, {} indexed, {} free of {} slots", live,
                         num_entries(), free_slots_.size(), num_slots());
  }
  for (KvGroup g : kAllKvGroups) {
    const PagePool* pool = pools_[GroupIndex(g)];
    if (pool == nullptr) continue;
    for (int32_t page = 0; page < pool->capacity(); ++page) {
      const int32_t tag = pool->cache_tag(page);
      if (tag >= 0 && (tag >= num_slots() || !entries_[tag].in_use ||
                       entries_[tag].page[GroupIndex(g)] != page)) {
        return InternalError("{} page {} is tagged to cache entry {} which does not hold it",
                             KvGroupName(g), page, tag);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gannet::kv
