// The KV cache's one layout value: page size, window, pages per pool, the padding page, and
// every layer's K/V array (docs/kv-memory.md). MakeKvLayout builds and validates it in one
// place; the KV manager (host bookkeeping of page ids) and the runner's KV storage (device
// arrays) both take it, so they can never disagree on a pool's size or a layer's geometry.
//
// Pages. Each group that has layers owning KV gets `num_pages[g]` pages that the KV manager hands
// out (ids 0 .. num_pages - 1) plus ONE padding page (id num_pages[g]), stored but never handed
// out: padded decode rows write and read it. Slot ids (page * page_size + offset) are int32 in
// step metadata and kernels, so a pool's storage holds at most kMaxPoolTokens tokens.
//
// Arrays. A layer that owns KV has a K and a V array of [storage pages, kv heads, page size,
// head dim] elements (only V when k_from_v); a KV-shared layer reads its source layer's arrays.
// Sizes are int64: one layer's array can exceed 2^31 elements (E2B's full layers on an H200 hold
// ~5e9).
//
// Plain value type: copy freely, thread-compatible.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/kv/kv_types.h"

namespace gannet::kv {

// One decoder layer's KV geometry.
struct KvLayerGeometry {
  KvGroup group = KvGroup::kSliding;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t source = -1;  // the layer whose K/V arrays this one reads; -1 = its own (owns KV)
  // Single-store K=V (full layers of 31B / 26B-A4B, whose V is the raw K projection): the layer
  // keeps ONE array, V = v_norm(k_raw), and the attention kernels derive K = RoPE(k_norm_w * V)
  // from it (k_norm(x) = v_norm(x) * w: the normalisation is shared, so storing its result once
  // leaves only the weight and the rotation to the kernels). Halves the layer's KV bytes.
  bool k_from_v = false;

  bool owns_kv() const { return source < 0; }
  // Cached arrays of a layer owning KV: V alone when K is derived from it, else K and V.
  int arrays() const { return k_from_v ? 1 : 2; }
  friend bool operator==(const KvLayerGeometry&, const KvLayerGeometry&) = default;
};

// Slot ids are int32: page * page_size + offset < 2^31 for every stored page, padding included.
inline constexpr int64_t kMaxPoolTokens = std::numeric_limits<int32_t>::max();
// Largest page size the kernels and planner accept.
inline constexpr int32_t kMaxPageSize = 1024;

// Bytes of a cached element: 1 under kFp8E4M3, else the backend's own (`native`).
constexpr int32_t KvElementBytes(KvQuant quant, int32_t native) {
  return quant == KvQuant::kFp8E4M3 ? 1 : native;
}
// Bytes of one (token, head) row of K or of V: head_dim elements plus the row's scale under
// kFp8E4M3.
constexpr int64_t KvRowBytes(int64_t head_dim, int64_t dtype_bytes, KvQuant quant) {
  return head_dim * dtype_bytes + (quant == KvQuant::kFp8E4M3 ? kKvScaleBytes : 0);
}

// Bytes one token costs in each group: sum over layers owning KV of
// arrays() (K and V, or V alone) x num_kv_heads x KvRowBytes.
PerGroup<int64_t> KvBytesPerToken(absl::Span<const KvLayerGeometry> layers, int64_t dtype_bytes,
                                  KvQuant quant = KvQuant::kNone);

// The groups that have at least one layer owning KV.
PerGroup<bool> KvGroupsPresent(absl::Span<const KvLayerGeometry> layers);

struct KvLayout {
  int32_t page_size = 0;
  int32_t sliding_window = 0;            // W (0 when the model has no sliding layers)
  int32_t dtype_bytes = 0;               // bytes per cached element
  KvQuant quant = KvQuant::kNone;        // kFp8E4M3: 1-byte elements + per-row f32 scale arrays
  PerGroup<int32_t> num_pages = {0, 0};  // pages the KV manager hands out, per GroupIndex()
  std::vector<KvLayerGeometry> layers;

  bool has_group(KvGroup g) const { return num_pages[GroupIndex(g)] > 0; }
  // The page padded decode rows use: past the managed pages, stored but never handed out.
  int32_t padding_page(KvGroup g) const { return num_pages[GroupIndex(g)]; }
  // Pages the storage holds for the group (managed + padding; 0 for an absent group).
  int32_t storage_pages(KvGroup g) const { return has_group(g) ? num_pages[GroupIndex(g)] + 1 : 0; }
  int64_t bytes_per_token(KvGroup g) const;
  // Elements of ONE of layer l's K or V arrays (of its source layer when it shares KV).
  int64_t ArrayElements(int layer) const;
  int64_t ArrayBytes(int layer) const { return ArrayElements(layer) * dtype_bytes; }
  // Under kFp8E4M3, elements of ONE of layer l's K or V scale arrays ([storage pages, kv heads,
  // page size] f32); 0 otherwise.
  int64_t ScaleElements(int layer) const;
  // Device bytes of all arrays (K and V, or V alone, of every layer owning KV, scales included).
  int64_t TotalBytes() const;
};

// Validates and builds the layout. InvalidArgument naming the field for: a page size outside
// [1, kMaxPageSize], a dtype size outside {1, 2, 4} (1 exactly when quant is kFp8E4M3), a layer
// with non-positive heads or head dim, a source that is not an earlier layer owning KV in the same
// group with the same geometry, pages for a group without layers or no pages for a group with
// layers, a sliding group without a window, and a pool whose storage would pass kMaxPoolTokens
// tokens or whose arrays would pass int64 bytes.
absl::StatusOr<KvLayout> MakeKvLayout(std::vector<KvLayerGeometry> layers, int32_t page_size,
                                      int32_t sliding_window, int32_t dtype_bytes,
                                      PerGroup<int32_t> num_pages, KvQuant quant = KvQuant::kNone);

}  // namespace gannet::kv
