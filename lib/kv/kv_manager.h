// KvManager: the paged hybrid KV bookkeeping of one engine (docs/kv-memory.md).
//
// What it owns. Host-side state only: one page pool per KV group (sliding-window layers and
// full-attention layers, see kv_types.h), one page table per group per sequence, and the prefix
// cache. The runner owns the device K/V arrays; a page id p addresses page p in every layer of
// its group. Both groups use the same page size P in tokens, so block i of a sequence (positions
// [iP, iP + P)) is page table entry i in both groups. A model may lack one group (capacity 0).
//
// Sliding window. A sliding layer's query at position q reads keys q - W + 1 .. q. Sliding pages
// whose tokens are all older than what the next query can read go back to the pool through
// ReleaseSlidingBefore; their table entries become holes (kNoPage). Kernels never read a hole.
//
// Page states (every page is in exactly one): free; owned (refcount = page-table references +
// pins, >= 1); cached (refcount 0, content registered in the prefix cache, reclaimed least
// recently released first when an allocation finds the free list empty).
//
// Write safety. A sequence writes only positions >= Length(): into its last, partial page or
// into fresh pages. Fork copies that partial page and Truncate copies a shared boundary page
// (both return the copies), so a page that is shared or cached is never written.
//
// Errors: unknown or duplicate sequence ids and bad positions -> InvalidArgument; not enough
// pages -> ResourceExhausted naming the group and the counts, with nothing changed; requests
// the current state cannot satisfy (a prefix no longer cached, truncating into released sliding
// pages) -> FailedPrecondition. A failed call changes nothing.
//
// Thread safety: none. The engine thread owns the manager and is its only user. Spans returned
// by PageTable stay valid until the next call that changes that sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/kv/kv_layout.h"
#include "lib/kv/kv_types.h"
#include "lib/kv/page_pool.h"
#include "lib/kv/prefix_cache.h"

namespace gannet::kv {

// True when the environment has GANNET_DEBUG_KV=1.
bool DebugKvFromEnv();

// Page size P, window W and the pool sizes come from the KvLayout (kv_layout.h) that the runner's
// storage is built from too; these are the manager's own switches.
struct KvManagerOptions {
  bool enable_prefix_cache = true;
  // Callers run ValidateRead before each kernel launch when set (docs/kv-memory.md, "Debug mode").
  bool debug_validate = DebugKvFromEnv();
  BlockHashFn block_hash = nullptr;  // null = DefaultBlockHash; tests inject weak hashes
};

struct KvStats {
  int64_t prefix_lookups = 0;
  int64_t prefix_queried_tokens = 0;     // sum of the max_len given to MatchPrefix
  int64_t prefix_hit_tokens = 0;         // sum of what MatchPrefix returned
  PerGroup<int64_t> evictions = {0, 0};  // cached pages reclaimed for allocations

  double HitRate() const {
    return prefix_queried_tokens > 0
               ? static_cast<double>(prefix_hit_tokens) / prefix_queried_tokens
               : 0.0;
  }
};

class KvManager {
 public:
  // Manages layout.num_pages[g] pages per group (the layout's padding page is not handed out).
  // The layout was validated by MakeKvLayout; InvalidArgument if it has no pages at all.
  static absl::StatusOr<std::unique_ptr<KvManager>> Create(const KvLayout& layout,
                                                           const KvManagerOptions& options = {});
  KvManager(const KvManager&) = delete;
  KvManager& operator=(const KvManager&) = delete;

  int32_t page_size() const { return page_size_; }
  int32_t sliding_window() const { return window_; }
  bool debug_validate() const { return debug_validate_; }
  bool has_group(KvGroup g) const { return pools_[GroupIndex(g)].capacity() > 0; }
  PoolUsage Usage(KvGroup g) const;
  int32_t NumAvailablePages(KvGroup g) const { return pools_[GroupIndex(g)].num_available(); }
  const KvStats& stats() const { return stats_; }

  // ---- Sequences ----
  // A new empty sequence (length 0, no pages).
  absl::Status AddSequence(int64_t seq_id);
  bool HasSequence(int64_t seq_id) const { return seqs_.contains(seq_id); }
  int64_t num_sequences() const { return static_cast<int64_t>(seqs_.size()); }
  absl::StatusOr<int64_t> Length(int64_t seq_id) const;

  // Pages per group that Grow(seq_id, new_len) would allocate (0 where new_len <= Length).
  absl::StatusOr<PerGroup<int64_t>> PagesNeeded(int64_t seq_id, int64_t new_len) const;
  absl::StatusOr<bool> CanGrow(int64_t seq_id, int64_t new_len) const;
  // Whether these page counts can be allocated now (free + evictable), e.g. summed over a step.
  bool CanAllocate(const PerGroup<int64_t>& pages) const;

  // Gives positions [0, new_len) pages in every group and sets Length to new_len; a no-op when
  // new_len <= Length. All or nothing: ResourceExhausted (group, needed, available) otherwise.
  // O(new pages).
  absl::Status Grow(int64_t seq_id, int64_t new_len);

  // Returns sliding pages whose tokens are all < first_needed_pos to the pool (holes remain).
  // Pass (next position to compute) - W + 1 before each step, for every running sequence.
  // Values past Length - W + 1 are clamped: the next position is at least Length and reads back
  // to Length - W + 1. Never re-grows released blocks; a no-op without a sliding group.
  absl::Status ReleaseSlidingBefore(int64_t seq_id, int64_t first_needed_pos);

  // Shrinks the sequence to new_len <= Length (speculative decoding rollback). Pages wholly past
  // new_len are released (cached ones stay cached). The page holding new_len - 1, if partial, is
  // made writable: unregistered from the prefix cache when this sequence is its only user,
  // otherwise copied to a fresh page (the returned copies). FailedPrecondition if sliding pages
  // the new next position needs (>= new_len - W + 1) were released; ResourceExhausted if a copy
  // has no page.
  absl::StatusOr<std::vector<PageCopy>> Truncate(int64_t seq_id, int64_t new_len);

  // Releases all pages of the sequence and forgets it. Pages holding prefix-cache blocks become
  // cached (later blocks nearer the LRU front, so a chain is evicted from its tail).
  absl::Status Free(int64_t seq_id);

  // Creates dst_seq_id sharing src's pages (refcount). The last, partially filled page of each
  // group gets a fresh page instead: the caller must copy {group, src_page, dst_page} before the
  // next write to either sequence. InvalidArgument if dst exists; ResourceExhausted (nothing
  // changed) if a copy has no page.
  absl::StatusOr<std::vector<PageCopy>> Fork(int64_t src_seq_id, int64_t dst_seq_id);

  // [ceil(Length / P)] page ids of the sequence in `group`; kNoPage for released sliding blocks.
  // Empty for a group the model does not have. Valid until the next call changing the sequence.
  absl::StatusOr<absl::Span<const int32_t>> PageTable(int64_t seq_id, KvGroup group) const;

  // ---- Prefix cache (full blocks only) ----
  // Registers the sequence's full blocks [0, computed_len / P) whose KV is computed: both
  // groups' pages of each block, the sliding one only if it still exists. tokens must be the
  // sequence's token ids (at least computed_len of them; blocks registered by an earlier call
  // are not re-read). computed_len <= Length. A no-op when the prefix cache is disabled.
  // `salts` (here, in MatchPrefix and AttachPrefix): empty, or per block a salt folded into its
  // key (0: none), which must be the same for every call about one sequence: the image content
  // of blocks holding image positions (lib/common/image_blocks.h: ImagePageSalts).
  absl::Status CommitPages(int64_t seq_id, absl::Span<const int32_t> tokens, int64_t computed_len,
                           absl::Span<const uint64_t> salts = {});

  // Usable cached length of tokens[0, max_len): a multiple of P such that every block before it
  // has its full-group page cached and the sliding group still has the pages covering positions
  // [max(0, L - W), L); shortened otherwise, never wrong (every block's tokens are compared).
  // Counts a lookup in stats(). Pass max_len = prompt length - 1 to keep one token to compute.
  int64_t MatchPrefix(absl::Span<const int32_t> tokens, int64_t max_len,
                      absl::Span<const uint64_t> salts = {});

  // Gives an empty sequence the cached pages of tokens[0, len), len a multiple of P that
  // MatchPrefix would return in full: refcount++ (cached pages leave the LRU), Length = len,
  // sliding holes for blocks wholly before len - W, blocks counted as committed.
  // FailedPrecondition if that prefix is no longer cached in full.
  absl::Status AttachPrefix(int64_t seq_id, absl::Span<const int32_t> tokens, int64_t len,
                            absl::Span<const uint64_t> salts = {});

  // ---- Pins: keep a page alive outside any table (e.g. an in-flight copy of it) ----
  // InvalidArgument for an absent group, an out-of-range or free page, or unpinning past zero.
  absl::Status PinPage(KvGroup group, int32_t page);
  absl::Status UnpinPage(KvGroup group, int32_t page);

  // ---- Debug validation (kv_manager_check.cc) ----
  // Checks that every page covering positions [first_pos, last_pos] of the sequence in `group`
  // is a real page (in range, not a hole, not free) of its table. Internal error with a dump
  // (seq, group, position, page, state, nearby table) otherwise; InvalidArgument for an unknown
  // sequence or absent group.
  absl::Status ValidateRead(int64_t seq_id, KvGroup group, int64_t first_pos,
                            int64_t last_pos) const;
  // Verifies every global invariant in O(pages + table entries + cached blocks): page states and
  // lists, refcount == table references + pins, free + owned + cached == capacity, table sizes
  // and holes, write safety of partial pages, prefix-cache structure. For tests.
  absl::Status CheckInvariants() const;

  // Calls fn(block_index, block_tokens, pages) for each prefix-cache block (tests verify that the
  // pages still hold those tokens).
  template <typename Fn>
  void ForEachCachedBlock(Fn&& fn) const {
    cache_->ForEachBlock(std::forward<Fn>(fn));
  }

 private:
  struct Sequence {
    int64_t length = 0;
    PerGroup<std::vector<int32_t>> table;
    // Sliding blocks [0, keep_from / P) are holes: every position < keep_from was released.
    int64_t keep_from = 0;
    int64_t committed_blocks = 0;  // blocks [0, committed) are registered (or were duplicates)
    int32_t last_entry = -1;       // prefix-cache entry of block committed - 1, holds a seq ref
  };

  KvManager(const KvLayout& layout, const KvManagerOptions& options);
  absl::StatusOr<Sequence*> Find(int64_t seq_id);
  absl::StatusOr<const Sequence*> Find(int64_t seq_id) const;
  int64_t NumBlocks(int64_t len) const { return (len + page_size_ - 1) / page_size_; }
  // ResourceExhausted naming the first group short of pages. Formats nothing on success: Grow
  // runs it for every decode token.
  absl::Status CheckAvailable(const PerGroup<int64_t>& pages, std::string_view what, int64_t seq_id,
                              int64_t length, int64_t new_length) const;
  // A page from the free list, evicting the least recently released cached page if needed.
  int32_t AllocatePage(KvGroup group);
  void ReleaseAll(Sequence& seq);

  const int32_t page_size_;
  const int32_t window_;
  const bool enable_prefix_cache_;
  const bool debug_validate_;
  PerGroup<PagePool> pools_;
  std::unique_ptr<PrefixCache> cache_;
  absl::flat_hash_map<int64_t, Sequence> seqs_;
  KvStats stats_;
  std::vector<int32_t> match_scratch_;  // reused by MatchPrefix/AttachPrefix
};

}  // namespace gannet::kv
