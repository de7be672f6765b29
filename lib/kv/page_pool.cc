#include "lib/kv/page_pool.h"

#include "lib/common/check.h"
#include "lib/common/status.h"

namespace gannet::kv {

PagePool::PagePool(int32_t capacity)
    : state_(capacity, PageState::kFree),
      refcount_(capacity, 0),
      pins_(capacity, 0),
      cache_tag_(capacity, -1),
      lru_prev_(capacity, -1),
      lru_next_(capacity, -1) {
  free_list_.reserve(capacity);
  // Pushed in reverse so that a fresh pool hands out pages 0, 1, 2, ... (readable dumps).
  for (int32_t p = capacity - 1; p >= 0; --p) free_list_.push_back(p);
}

int32_t PagePool::Allocate() {
  GANNET_CHECK(!free_list_.empty());
  const int32_t page = free_list_.back();
  free_list_.pop_back();
  GANNET_CHECK(state_[page] == PageState::kFree);
  state_[page] = PageState::kOwned;
  refcount_[page] = 1;
  return page;
}

void PagePool::IncRef(int32_t page) {
  GANNET_CHECK(state_[page] != PageState::kFree);
  if (state_[page] == PageState::kCached) {
    LruUnlink(page);
    state_[page] = PageState::kOwned;
  }
  ++refcount_[page];
}

void PagePool::DecRef(int32_t page) {
  GANNET_CHECK(state_[page] == PageState::kOwned && refcount_[page] > pins_[page]);
  if (--refcount_[page] > 0) return;
  if (cache_tag_[page] >= 0) {
    state_[page] = PageState::kCached;
    LruPushBack(page);
  } else {
    state_[page] = PageState::kFree;
    free_list_.push_back(page);
  }
}

void PagePool::Pin(int32_t page) {
  IncRef(page);
  ++pins_[page];
}

void PagePool::Unpin(int32_t page) {
  GANNET_CHECK(pins_[page] > 0);
  --pins_[page];
  DecRef(page);
}

void PagePool::SetCacheTag(int32_t page, int32_t tag) {
  GANNET_CHECK(tag >= 0 && cache_tag_[page] < 0 && state_[page] == PageState::kOwned);
  cache_tag_[page] = tag;
}

void PagePool::ClearCacheTag(int32_t page) {
  GANNET_CHECK(cache_tag_[page] >= 0);
  cache_tag_[page] = -1;
  if (state_[page] == PageState::kCached) {
    LruUnlink(page);
    state_[page] = PageState::kFree;
    free_list_.push_back(page);
  }
}

void PagePool::LruPushBack(int32_t page) {
  lru_prev_[page] = lru_tail_;
  lru_next_[page] = -1;
  if (lru_tail_ >= 0) {
    lru_next_[lru_tail_] = page;
  } else {
    lru_head_ = page;
  }
  lru_tail_ = page;
  ++lru_size_;
}

void PagePool::LruUnlink(int32_t page) {
  const int32_t prev = lru_prev_[page];
  const int32_t next = lru_next_[page];
  if (prev >= 0) {
    lru_next_[prev] = next;
  } else {
    lru_head_ = next;
  }
  if (next >= 0) {
    lru_prev_[next] = prev;
  } else {
    lru_tail_ = prev;
  }
  lru_prev_[page] = lru_next_[page] = -1;
  --lru_size_;
}

absl::Status PagePool::CheckConsistency() const {
  std::vector<uint8_t> seen(state_.size(), 0);
  for (int32_t page : free_list_) {
    if (!InRange(page) || seen[page]) {
      return InternalError("free list holds page {} twice or out of range", page);
    }
    seen[page] = 1;
    if (state_[page] != PageState::kFree) {
      return InternalError("page {} is on the free list but not free", page);
    }
  }
  int32_t count = 0;
  int32_t prev = -1;
  for (int32_t page = lru_head_; page >= 0; page = lru_next_[page]) {
    if (!InRange(page) || seen[page] || ++count > lru_size_) {
      return InternalError("LRU list is broken at page {}", page);
    }
    seen[page] = 1;
    if (state_[page] != PageState::kCached || lru_prev_[page] != prev) {
      return InternalError("page {} is in the LRU but not cached, or badly linked", page);
    }
    prev = page;
  }
  if (count != lru_size_ || prev != lru_tail_) {
    return InternalError("LRU holds {} pages, size says {}", count, lru_size_);
  }
  for (int32_t page = 0; page < capacity(); ++page) {
    const PageState s = state_[page];
    const bool ok = s == PageState::kFree     ? refcount_[page] == 0 && cache_tag_[page] < 0
                    : s == PageState::kCached ? refcount_[page] == 0 && cache_tag_[page] >= 0
                                              : refcount_[page] >= 1 && !seen[page];
    if (!ok || (s != PageState::kOwned && !seen[page]) || pins_[page] > refcount_[page] ||
        pins_[page] < 0) {
      return InternalError("page {}: state {} refcount {} pins {} tag {} listed {}", page,
                           static_cast<int>(s), refcount_[page], pins_[page], cache_tag_[page],
                           seen[page]);
    }
  }
  return absl::OkStatus();
}

}  // namespace gannet::kv
