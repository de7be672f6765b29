#include "lib/runner/kv_storage.h"

#include "lib/backend/kv_cache.h"
#include "lib/common/status.h"
#include "lib/common/units.h"

namespace gannet::runner {

std::vector<kv::KvLayerGeometry> KvLayersOf(const model::TextConfig& c, bool k_eq_v_single_store) {
  std::vector<kv::KvLayerGeometry> layers;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    // A KV-shared layer carries its donor's flag (a K=V donor is a full layer; so is the reader).
    const int owner = c.IsKvShared(l) ? c.KvDonor(l) : l;
    layers.push_back({c.is_sliding(l) ? kv::KvGroup::kSliding : kv::KvGroup::kFull,
                      c.LayerNumKvHeads(l), c.LayerHeadDim(l), c.IsKvShared(l) ? c.KvDonor(l) : -1,
                      k_eq_v_single_store && c.LayerKEqV(owner)});
  }
  return layers;
}

absl::StatusOr<std::unique_ptr<KvStorage>> KvStorage::Create(const model::TextConfig& c,
                                                             const kv::KvLayout& layout,
                                                             backend::Backend* backend) {
  if (layout.layers != KvLayersOf(c, true) && layout.layers != KvLayersOf(c, false)) {
    return InvalidArgumentError(
        "KV storage: the KV layout does not describe this model's {} layers", c.num_hidden_layers);
  }
  const bool fp8 = layout.quant == kv::KvQuant::kFp8E4M3;
  const DType dt = fp8 ? DType::kF8E4M3 : backend->kv_dtype();
  if (layout.dtype_bytes != DTypeBits(dt) / 8) {
    return InvalidArgumentError(
        "KV storage: the layout has {}-byte elements, the backend stores {}", layout.dtype_bytes,
        DTypeName(dt));
  }
  auto s = std::make_unique<KvStorage>();
  s->layout_ = layout;
  s->layers_.resize(c.num_hidden_layers);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const kv::KvLayerGeometry& g = layout.layers[l];
    if (!g.owns_kv()) continue;
    // Sizes in int64: one array can hold more than 2^31 elements.
    const int64_t pages = layout.storage_pages(g.group);
    const size_t bytes = static_cast<size_t>(layout.ArrayBytes(l));
    backend::LayerKvView kv;
    kv.group = kv::GroupIndex(g.group);
    kv.k_from_v = g.k_from_v;
    struct Array {
      backend::Tensor* t;
      const char* name;
      bool scale;
    };
    const Array arrays[] = {{&kv.k, "K", false},
                            {&kv.v, "V", false},
                            {&kv.k_scale, "K scale", true},
                            {&kv.v_scale, "V scale", true}};
    for (const Array& a : arrays) {
      if (a.scale && !fp8) continue;
      if (g.k_from_v && (a.t == &kv.k || a.t == &kv.k_scale)) continue;
      const int64_t elems = a.scale ? layout.ScaleElements(l) : layout.ArrayElements(l);
      const size_t n = static_cast<size_t>(a.scale ? elems * kv::kKvScaleBytes : bytes);
      absl::StatusOr<backend::Buffer> buf = backend->AllocateZeroed(n);
      if (!buf.ok()) {
        return absl::Status(buf.status().code(),
                            fmt::format("KV storage: layer {} {} array ({} elements, {}; all KV "
                                        "arrays {}): {}",
                                        l, a.name, elems, FormatBytes(static_cast<int64_t>(n)),
                                        FormatBytes(layout.TotalBytes()), buf.status().message()));
      }
      *a.t = a.scale ? buf->View(DType::kF32, {pages, g.num_kv_heads, layout.page_size})
                     : buf->View(dt, {pages, g.num_kv_heads, layout.page_size, g.head_dim});
      s->bytes_ += n;
      s->buffers_.push_back(*std::move(buf));
    }
    s->layers_[l] = kv;
  }
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (!layout.layers[l].owns_kv()) s->layers_[l] = s->layers_[layout.layers[l].source];
  }
  return s;
}

absl::Status KvStorage::BindKDerivation(int layer, backend::Tensor k_norm,
                                        const backend::RopeSpec& rope) {
  if (layer < 0 || layer >= static_cast<int>(layers_.size()) || !layout_.layers[layer].owns_kv() ||
      !layers_[layer].k_from_v) {
    return InvalidArgumentError("KV storage: layer {} does not derive K from its V array", layer);
  }
  GANNET_RETURN_IF_ERROR(backend::CheckKFromV(fmt::format("KV storage: layer {}", layer), k_norm,
                                              rope.rotated_pairs, layout_.layers[layer].head_dim));
  for (int l = 0; l < static_cast<int>(layers_.size()); ++l) {
    if (l == layer || layout_.layers[l].source == layer) {
      layers_[l].k_norm = k_norm;
      layers_[l].rope = rope;
    }
  }
  return absl::OkStatus();
}

}  // namespace gannet::runner
