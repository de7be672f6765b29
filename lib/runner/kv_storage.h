// Device memory for the paged KV cache: one K and one V array per layer that owns KV, each
// [num_pages(group), n_kv_heads, page_size, head_dim] in the backend's KV type. KV-shared layers
// (E2B/E4B) have no arrays: Layer(l) returns their donor's. Page p of a group is page p in every
// layer of that group; which sequence owns it is the KV manager's business.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/model/config.h"

namespace gannet::runner {

struct KvGeometry {
  int page_size = 16;
  int64_t num_pages[2] = {0, 0};  // sliding, full
};

class KvStorage {
 public:
  static absl::StatusOr<std::unique_ptr<KvStorage>> Create(const model::TextConfig& config,
                                                            backend::Backend* backend,
                                                            const KvGeometry& geometry);
  struct LayerKv {
    backend::Tensor k;
    backend::Tensor v;
    int group = 0;
  };
  const LayerKv& Layer(int layer) const { return layers_[layer]; }
  const KvGeometry& geometry() const { return geometry_; }
  uint64_t bytes() const { return bytes_; }

 private:
  KvGeometry geometry_;
  std::vector<backend::Buffer> buffers_;
  std::vector<LayerKv> layers_;
  uint64_t bytes_ = 0;
};

}  // namespace gannet::runner
