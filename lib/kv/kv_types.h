// Vocabulary shared by the KV manager, its pool planner and their callers: the two KV groups of
// Gemma-4 and small per-group value types.
//
// A KV group is a set of layers that share one page geometry and one page table per sequence:
// the sliding-window layers (head_dim 256) and the full-attention layers (head_dim 512). Page
// id p of a group addresses page p in every layer of that group that owns KV; KV-shared layers
// (E2B/E4B) and the MTP drafter read their donor's pages through the same group tables.
// Plain value types: copy freely, no thread-safety concerns.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace gannet::kv {

enum class KvGroup : uint8_t { kSliding = 0, kFull = 1 };

inline constexpr int kNumKvGroups = 2;
inline constexpr std::array<KvGroup, kNumKvGroups> kAllKvGroups = {KvGroup::kSliding,
                                                                   KvGroup::kFull};

// Marks a hole in a page table: a sliding-group block whose tokens all fell out of the window.
inline constexpr int32_t kNoPage = -1;

// One value per group, indexed with GroupIndex().
template <typename T>
using PerGroup = std::array<T, kNumKvGroups>;

constexpr int GroupIndex(KvGroup group) { return static_cast<int>(group); }

constexpr std::string_view KvGroupName(KvGroup group) {
  return group == KvGroup::kSliding ? "sliding" : "full";
}

// A page the caller must copy on the device (every layer of `group`, K and V) before the next
// write to dst_page: Fork and Truncate hand these out for copy-on-write.
struct PageCopy {
  KvGroup group = KvGroup::kFull;
  int32_t src_page = kNoPage;
  int32_t dst_page = kNoPage;

  friend bool operator==(const PageCopy&, const PageCopy&) = default;
};

// How the cache stores K and V. kNone: elements of the backend's KV type (bf16 on CUDA, f32 in
// the CPU reference). kFp8E4M3: one byte per element (OCP E4M3, saturated) plus one f32 scale per
// (token, kv head) row of K and of V, amax / 448 of that row: a row is scaled as it is written, so
// no page-wide scale ever has to change when a later token arrives, and an outlier token costs
// only its own precision.
enum class KvQuant : uint8_t { kNone = 0, kFp8E4M3 = 1 };
inline constexpr int32_t kKvScaleBytes = 4;  // per row, kFp8E4M3 only

constexpr std::string_view KvQuantName(KvQuant q) {
  return q == KvQuant::kNone ? "none" : "fp8_e4m3";
}

// Page accounting of one group's pool: capacity == free + owned + cached.
struct PoolUsage {
  int32_t capacity = 0;
  int32_t free = 0;    // on the free list
  int32_t owned = 0;   // refcount >= 1 (in some page table and/or pinned)
  int32_t cached = 0;  // refcount 0 but holding a prefix-cache block: reclaimable, LRU first

  int32_t available() const { return free + cached; }
};

}  // namespace gannet::kv
