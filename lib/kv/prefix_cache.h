// Prefix cache: a content-addressed index of full KV blocks (P tokens each) for reuse across
// requests with a common prompt prefix.
//
// Block i of a token sequence is keyed by a chained hash: h_i = hash(h_{i-1}, tokens[iP, iP+P)),
// mixed with the block's salt when it has one (non-zero: the block holds image positions, whose
// token ids do not say which picture they show; lib/common/image_blocks.h: ImagePageSalts).
// An entry keeps the block's token ids, salt and parent entry, so a lookup verifies every block
// of a chain exactly and a hash collision can only make a hit shorter, never wrong. An entry holds
// at most one page per group; a page holds at most one entry's content (its pool "cache tag").
//
// Entry lifetime. An entry lives while it holds a page, has children, or is the last committed
// block of a live sequence (a "sequence reference", so the sequence can link its next block).
// Entries without pages ("ghosts") keep a chain verifiable: a sliding-only model needs no pages
// for blocks older than the window, only proof that their tokens match.
//
// Hybrid models (both groups): a hit needs the full page of every block, so an entry that loses
// its full page also gives up its sliding page (the sliding pool is the scarce one), and a
// sliding page only joins an entry that has its full page.
//
// Owned by the KvManager, which also owns the pools it points to; one thread (the engine
// thread), no internal locking.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "lib/kv/kv_types.h"
#include "lib/kv/page_pool.h"

namespace gannet::kv {

// Hash of one block given its parent's hash. Tests inject weak ones to force collisions.
using BlockHashFn = uint64_t (*)(uint64_t parent_hash, absl::Span<const int32_t> block_tokens);
uint64_t DefaultBlockHash(uint64_t parent_hash, absl::Span<const int32_t> block_tokens);

class PrefixCache {
 public:
  // pools[g] is null for a group the model does not have. The pools must outlive the cache.
  PrefixCache(int32_t page_size, int32_t sliding_window, PerGroup<PagePool*> pools,
              BlockHashFn hash);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest usable cached prefix of tokens[0, min(max_len, size)), in tokens: a multiple of
  // P such that every block before it has its full page (if the model has full layers) and the
  // sliding pages covering [max(0, L - W), L) exist (if it has sliding layers). `entries`
  // receives the entry of each block [0, L / P). `salts`: empty, or the salt of each block (0 for
  // none; blocks past its end have none).
  int64_t Match(absl::Span<const int32_t> tokens, int64_t max_len, std::vector<int32_t>* entries,
                absl::Span<const uint64_t> salts = {}) const;

  // The entry for the block following `parent` (-1: block 0) with these P tokens and this salt,
  // created without pages if missing; -1 when its hash is taken by a different block (a
  // collision).
  int32_t FindOrCreate(int32_t parent, absl::Span<const int32_t> block_tokens, uint64_t salt = 0);

  // Registers `page` (owned by the caller's table) as holding the entry's `group` content, unless
  // the entry already has a page there, the page already serves an entry, or (hybrid models) a
  // sliding page would join an entry without its full page.
  void TryAddPage(int32_t entry, KvGroup group, int32_t page);

  // Unregisters a tagged page (eviction, or before the page is overwritten); an unreferenced page
  // goes back to its free list. Entries left empty are erased.
  void DropPage(KvGroup group, int32_t page);

  void AddSeqRef(int32_t entry);
  void ReleaseSeqRef(int32_t entry);  // may erase the entry and its empty ancestors

  int32_t parent(int32_t entry) const { return entries_[entry].parent; }
  int32_t block(int32_t entry) const { return entries_[entry].block; }
  bool in_use(int32_t entry) const {
    return entry >= 0 && entry < num_slots() && entries_[entry].in_use;
  }
  int32_t page(int32_t entry, KvGroup group) const {
    return entries_[entry].page[GroupIndex(group)];
  }
  int64_t num_entries() const { return static_cast<int64_t>(index_.size()); }
  int32_t num_slots() const { return static_cast<int32_t>(entries_.size()); }

  // Calls fn(block_index, block_tokens, pages) for every live entry (tests verify page content).
  template <typename Fn>
  void ForEachBlock(Fn&& fn) const {
    for (int32_t e = 0; e < num_slots(); ++e) {
      if (entries_[e].in_use) fn(entries_[e].block, Tokens(e), entries_[e].page);
    }
  }

  // Full consistency check; seq_refs[e] is the number of sequences whose last committed block is
  // entry e (computed by the manager from its sequences).
  absl::Status CheckConsistency(const std::vector<int32_t>& seq_refs) const;

 private:
  struct Entry {
    uint64_t hash = 0;
    uint64_t salt = 0;  // 0: a text-only block
    int32_t parent = -1;
    int32_t block = 0;  // block index in its chain: covers tokens [block * P, block * P + P)
    int32_t num_children = 0;
    int32_t num_seq_refs = 0;
    PerGroup<int32_t> page = {kNoPage, kNoPage};
    bool in_use = false;
  };

  absl::Span<const int32_t> Tokens(int32_t e) const {
    return absl::MakeConstSpan(tokens_.data() + static_cast<size_t>(e) * page_size_, page_size_);
  }
  // hash_(parent, tokens), mixed with a non-zero salt.
  uint64_t KeyHash(uint64_t parent_hash, absl::Span<const int32_t> tokens, uint64_t salt) const;
  bool HasGroup(KvGroup g) const { return pools_[GroupIndex(g)] != nullptr; }
  bool Hybrid() const { return HasGroup(KvGroup::kSliding) && HasGroup(KvGroup::kFull); }
  // Erases e if it holds nothing, then its ancestors while they hold nothing either.
  void MaybeErase(int32_t e);

  const int32_t page_size_;
  const int32_t window_;
  const PerGroup<PagePool*> pools_;
  const BlockHashFn hash_;
  std::vector<Entry> entries_;   // slots; erased ones are reused through free_slots_
  std::vector<int32_t> tokens_;  // [num_slots, page_size] token ids of each entry's block
  std::vector<int32_t> free_slots_;
  absl::flat_hash_map<uint64_t, int32_t> index_;  // block hash -> entry
};

}  // namespace gannet::kv
