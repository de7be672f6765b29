// The one check of a layer's KV cache arguments (QkvPrep and Attention, both backends), against
// the storage backend.h describes: K and V [pages, n_kv, page_size, d] of the backend's KV type
// with no scales, or F8E4M3 with f32 scale arrays [pages, n_kv, page_size] (the same pages).
// kv.k_from_v (single-store K=V): no K array or K scales, V alone as above.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "lib/backend/backend.h"

namespace gannet::backend {

absl::Status CheckKvCache(std::string_view op, const LayerKvView& kv, int num_kv_heads,
                          int page_size, int head_dim, DType native);

// Attention's derivation of K from V (single-store K=V): a [head_dim] f32 k_norm weight and a
// rotation of at most head_dim / 2 pairs on an even head_dim.
absl::Status CheckKFromV(std::string_view op, const Tensor& k_norm, int rotated_pairs,
                         int head_dim);

}  // namespace gannet::backend
