#include "lib/kv/kv_layout.h"

#include "lib/common/status.h"

namespace gannet::kv {
namespace {

// a * b, or false when it would pass int64.
bool MulOk(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

}  // namespace

PerGroup<int64_t> KvBytesPerToken(absl::Span<const KvLayerGeometry> layers, int64_t dtype_bytes,
                                  KvQuant quant) {
  PerGroup<int64_t> bytes = {0, 0};
  for (const KvLayerGeometry& layer : layers) {
    if (!layer.owns_kv()) continue;
    bytes[GroupIndex(layer.group)] += layer.arrays() * static_cast<int64_t>(layer.num_kv_heads) *
                                      KvRowBytes(layer.head_dim, dtype_bytes, quant);
  }
  return bytes;
}

PerGroup<bool> KvGroupsPresent(absl::Span<const KvLayerGeometry> layers) {
  PerGroup<bool> present = {false, false};
  for (const KvLayerGeometry& layer : layers) {
    if (layer.owns_kv()) present[GroupIndex(layer.group)] = true;
  }
  return present;
}

int64_t KvLayout::bytes_per_token(KvGroup g) const {
  return KvBytesPerToken(layers, dtype_bytes, quant)[GroupIndex(g)];
}

int64_t KvLayout::ScaleElements(int layer) const {
  if (quant != KvQuant::kFp8E4M3) return 0;
  const KvLayerGeometry& l = layers[layer].owns_kv() ? layers[layer] : layers[layers[layer].source];
  return static_cast<int64_t>(storage_pages(l.group)) * l.num_kv_heads * page_size;
}

int64_t KvLayout::ArrayElements(int layer) const {
  const KvLayerGeometry& l = layers[layer].owns_kv() ? layers[layer] : layers[layers[layer].source];
  return static_cast<int64_t>(storage_pages(l.group)) * l.num_kv_heads * page_size * l.head_dim;
}

int64_t KvLayout::TotalBytes() const {
  int64_t total = 0;
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    if (layers[l].owns_kv())
      total += layers[l].arrays() * (ArrayBytes(l) + ScaleElements(l) * kKvScaleBytes);
  }
  return total;
}

absl::StatusOr<KvLayout> MakeKvLayout(std::vector<KvLayerGeometry> layers, int32_t page_size,
                                      int32_t sliding_window, int32_t dtype_bytes,
                                      PerGroup<int32_t> num_pages, KvQuant quant) {
  if (page_size < 1 || page_size > kMaxPageSize) {
    return InvalidArgumentError("kv layout: page_size {} is outside [1, {}]", page_size,
                                kMaxPageSize);
  }
  if (dtype_bytes != 1 && dtype_bytes != 2 && dtype_bytes != 4) {
    return InvalidArgumentError("kv layout: {} bytes per element is not 1, 2 or 4", dtype_bytes);
  }
  if (quant != KvQuant::kNone && quant != KvQuant::kFp8E4M3) {
    return InvalidArgumentError("kv layout: unknown KV quantisation {}", static_cast<int>(quant));
  }
  if ((quant == KvQuant::kFp8E4M3) != (dtype_bytes == 1)) {
    return InvalidArgumentError(
        "kv layout: {}-byte elements with KV quantisation {} (FP8 KV has 1-byte elements and "
        "scales; wider elements have none)",
        dtype_bytes, KvQuantName(quant));
  }
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    const KvLayerGeometry& g = layers[l];
    if (g.num_kv_heads < 1 || g.head_dim < 1) {
      return InvalidArgumentError("kv layout: layer {} has {} KV heads of dim {}", l,
                                  g.num_kv_heads, g.head_dim);
    }
    if (g.owns_kv()) continue;
    if (g.source >= l || !layers[g.source].owns_kv() || layers[g.source].group != g.group ||
        layers[g.source].num_kv_heads != g.num_kv_heads ||
        layers[g.source].head_dim != g.head_dim || layers[g.source].k_from_v != g.k_from_v) {
      return InvalidArgumentError(
          "kv layout: layer {} reads the KV of layer {}, which is not an earlier {} layer owning "
          "KV of the same geometry",
          l, g.source, KvGroupName(g.group));
    }
  }
  const PerGroup<bool> present = KvGroupsPresent(layers);
  if (!present[0] && !present[1]) {
    return InvalidArgumentError("kv layout: no layer owns KV");
  }
  for (KvGroup grp : kAllKvGroups) {
    const int gi = GroupIndex(grp);
    if (num_pages[gi] < 0 || (present[gi] != (num_pages[gi] > 0))) {
      return InvalidArgumentError(
          "kv layout: the {} pool has {} pages but the model {} {} layers owning KV",
          KvGroupName(grp), num_pages[gi], present[gi] ? "has" : "has no", KvGroupName(grp));
    }
    const int64_t stored_tokens =
        (static_cast<int64_t>(num_pages[gi]) + (present[gi] ? 1 : 0)) * page_size;
    if (stored_tokens > kMaxPoolTokens) {
      return InvalidArgumentError(
          "kv layout: the {} pool's {} pages (+1 padding page) of {} tokens hold {} tokens, more "
          "than the {} that int32 slot ids address; use at most {} pages",
          KvGroupName(grp), num_pages[gi], page_size, stored_tokens, kMaxPoolTokens,
          kMaxPoolTokens / page_size - 1);
    }
  }
  if (present[GroupIndex(KvGroup::kSliding)] && sliding_window < 1) {
    return InvalidArgumentError("kv layout: sliding layers need a window >= 1, got {}",
                                sliding_window);
  }
  KvLayout layout;
  layout.page_size = page_size;
  layout.sliding_window = sliding_window;
  layout.dtype_bytes = dtype_bytes;
  layout.quant = quant;
  layout.num_pages = num_pages;
  layout.layers = std::move(layers);
  int64_t total = 0;
  for (int l = 0; l < static_cast<int>(layout.layers.size()); ++l) {
    const KvLayerGeometry& g = layout.layers[l];
    if (!g.owns_kv()) continue;
    int64_t rows = layout.storage_pages(g.group), bytes = 0;
    if (!MulOk(rows, g.num_kv_heads, &rows) || !MulOk(rows, page_size, &rows) ||
        !MulOk(rows, g.arrays() * KvRowBytes(g.head_dim, dtype_bytes, quant), &bytes) ||
        __builtin_add_overflow(total, bytes, &total)) {
      return InvalidArgumentError("kv layout: layer {}'s K/V arrays overflow int64 bytes", l);
    }
  }
  return layout;
}

}  // namespace gannet::kv
