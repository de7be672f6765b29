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
// `k_eq_v_single_store`: K=V layers (config.LayerKEqV) keep one array (KvLayerGeometry::k_from_v),
// the engine's default; false stores K and V separately (the older layout, kept for comparison).
std::vector<kv::KvLayerGeometry> KvLayersOf(const model::TextConfig& config,
                                            bool k_eq_v_single_store = true);

class KvStorage {
 public:
  // Allocates every array of `layout` (zeroed, so a never-written slot reads finite). The
  // layout's layers must be KvLayersOf(config) (either store of K=V layers) and its element size
  // the backend's KV type's.
  // ResourceExhausted names the layer and bytes when the backend cannot allocate.
  static absl::StatusOr<std::unique_ptr<KvStorage>> Create(const model::TextConfig& config,
                                                           const kv::KvLayout& layout,
                                                           backend::Backend* backend);
  // Layer `layer`'s arrays ([storage pages, ...]; a KV-shared layer's are its donor's), as
  // QkvPrep and Attention take them (and a drafter attending into them).
  const backend::LayerKvView& Layer(int layer) const { return layers_[layer]; }
  // Binds the weight and rotation K is derived with to K=V layer `layer` (and the layers reading
  // its arrays). InvalidArgument if the layer does not store K in V or the weight is not
  // [head_dim] f32.
  absl::Status BindKDerivation(int layer, backend::Tensor k_norm, const backend::RopeSpec& rope);
  const kv::KvLayout& layout() const { return layout_; }
  uint64_t bytes() const { return bytes_; }

 private:
  kv::KvLayout layout_;
  std::vector<backend::Buffer> buffers_;
  std::vector<backend::LayerKvView> layers_;
  uint64_t bytes_ = 0;
};

}  // namespace gannet::runner
