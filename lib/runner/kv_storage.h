// Device memory for the paged KV cache, built from the one KV layout value (lib/kv/kv_layout.h):
// one K and one V array per layer that owns KV, each [storage pages(group), n_kv_heads,
// page_size, head_dim] in the backend's KV type, or FP8 with per-row scale arrays when the layout
// says kFp8E4M3 (backend.h). KV-shared layers (E2B/E4B) have no arrays:
// Layer(l) returns their source layer's. Page p of a group is page p in every layer of that
// group; which sequence owns it is the KV manager's business (it manages the same layout).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/kv/kv_layout.h"
#include "lib/model/config.h"

namespace gannet::runner {

// Each decoder layer's KV geometry: its group, KV heads and head dim, and for KV-shared layers
// the donor whose arrays it reads. The layout of a model is built from this list.
std::vector<kv::KvLayerGeometry> KvLayersOf(const model::TextConfig& config);

class KvStorage {
 public:
  // Allocates every array of `layout` (zeroed, so a never-written slot reads finite). The
  // layout's layers must be KvLayersOf(config) and its element size the backend's KV type's.
  // ResourceExhausted names the layer and bytes when the backend cannot allocate.
  static absl::StatusOr<std::unique_ptr<KvStorage>> Create(const model::TextConfig& config,
                                                            const kv::KvLayout& layout,
                                                            backend::Backend* backend);
  struct LayerKv {
    backend::Tensor k;  // [storage pages, n_kv_heads, page_size, head_dim]
    backend::Tensor v;
    backend::Tensor k_scale;  // [storage pages, n_kv_heads, page_size] f32 for FP8 KV, else invalid
    backend::Tensor v_scale;
    int group = 0;
  };
  const LayerKv& Layer(int layer) const { return layers_[layer]; }
  const kv::KvLayout& layout() const { return layout_; }
  uint64_t bytes() const { return bytes_; }

 private:
  kv::KvLayout layout_;
  std::vector<backend::Buffer> buffers_;
  std::vector<LayerKv> layers_;
  uint64_t bytes_ = 0;
};

}  // namespace gannet::runner
