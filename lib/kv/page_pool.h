// The page pool of one KV group: host-side bookkeeping of which page ids are in use.
//
// Every page is in exactly one state:
//   free    on the free list (refcount 0, no prefix-cache block);
//   owned   refcount >= 1: referenced by page tables and/or pinned;
//   cached  refcount 0 but holding the content of a prefix-cache block ("cache tag" set); it sits
//           in an LRU list and is reclaimed, least recently released first, when the free list
//           runs dry.
// All operations are O(1): the free list is a stack and the LRU an intrusive doubly linked list
// over per-page arrays, so the decode path never allocates. The pool does not evict on its own:
// the KV manager pops the LRU front and tells the prefix cache, which clears the tag.
// Owned by the KvManager; used by one thread (the engine thread), no internal locking.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace gannet::kv {

enum class PageState : uint8_t { kFree, kOwned, kCached };

class PagePool {
 public:
  explicit PagePool(int32_t capacity);

  int32_t capacity() const { return static_cast<int32_t>(state_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_cached() const { return lru_size_; }
  int32_t num_owned() const { return capacity() - num_free() - num_cached(); }
  // Pages an allocation can get: free ones plus cached ones it may evict.
  int32_t num_available() const { return num_free() + num_cached(); }

  bool InRange(int32_t page) const { return page >= 0 && page < capacity(); }
  PageState state(int32_t page) const { return state_[page]; }
  int32_t refcount(int32_t page) const { return refcount_[page]; }
  int32_t pins(int32_t page) const { return pins_[page]; }
  // The prefix-cache block holding this page's content, or -1.
  int32_t cache_tag(int32_t page) const { return cache_tag_[page]; }

  // Takes a page off the free list with refcount 1. Requires num_free() > 0.
  int32_t Allocate();
  // The least recently released cached page (the eviction victim), or -1 if none.
  int32_t LruFront() const { return lru_head_; }

  // A cached page becomes owned again (leaves the LRU); an owned page gains a reference.
  void IncRef(int32_t page);
  // At refcount 0 the page becomes cached (most recently used end of the LRU) if it has a cache
  // tag, free otherwise.
  void DecRef(int32_t page);
  void Pin(int32_t page);
  void Unpin(int32_t page);

  // Only the prefix cache sets and clears tags. Clearing the tag of a cached page frees it.
  void SetCacheTag(int32_t page, int32_t tag);
  void ClearCacheTag(int32_t page);

  // Full O(capacity) consistency check of the free list, the LRU and the per-page states.
  absl::Status CheckConsistency() const;

 private:
  void LruPushBack(int32_t page);
  void LruUnlink(int32_t page);

  std::vector<PageState> state_;
  std::vector<int32_t> refcount_;
  std::vector<int32_t> pins_;
  std::vector<int32_t> cache_tag_;
  std::vector<int32_t> free_list_;  // a stack: recently freed pages are reused first
  std::vector<int32_t> lru_prev_;
  std::vector<int32_t> lru_next_;
  int32_t lru_head_ = -1;  // least recently released
  int32_t lru_tail_ = -1;
  int32_t lru_size_ = 0;
};

}  // namespace gannet::kv
