#include "lib/runner/kv_storage.h"

#include "lib/common/status.h"

namespace gannet::runner {

absl::StatusOr<std::unique_ptr<KvStorage>> KvStorage::Create(const model::TextConfig& c,
                                                             backend::Backend* backend,
                                                             const KvGeometry& geometry) {
  auto s = std::make_unique<KvStorage>();
  s->geometry_ = geometry;
  s->layers_.resize(c.num_hidden_layers);
  const DType dt = backend->kv_dtype();
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (c.IsKvShared(l)) continue;
    const int g = c.is_sliding(l) ? 0 : 1;
    const int64_t pages = geometry.num_pages[g];
    if (pages <= 0) {
      return InvalidArgumentError("KV storage: layer {} needs the {} group but it has no pages", l,
                                  g == 0 ? "sliding" : "full");
    }
    const int64_t nkv = c.LayerNumKvHeads(l);
    const int64_t d = c.LayerHeadDim(l);
    const size_t bytes = static_cast<size_t>(pages * nkv * geometry.page_size * d) *
                         (DTypeBits(dt) / 8);
    LayerKv kv;
    kv.group = g;
    for (backend::Tensor* t : {&kv.k, &kv.v}) {
      // Zeroed so that a read of a never-written slot is finite, never NaN garbage.
      GANNET_ASSIGN_OR_RETURN(backend::Buffer buf, backend->AllocateZeroed(bytes));
      *t = buf.View(dt, {pages, nkv, geometry.page_size, d});
      s->bytes_ += bytes;
      s->buffers_.push_back(std::move(buf));
    }
    s->layers_[l] = kv;
  }
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (c.IsKvShared(l)) s->layers_[l] = s->layers_[c.KvDonor(l)];
  }
  return s;
}

}  // namespace gannet::runner
