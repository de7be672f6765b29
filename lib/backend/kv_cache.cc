#include "lib/backend/kv_cache.h"

#include "lib/common/status.h"

namespace gannet::backend {

absl::Status CheckKvCache(std::string_view op, const LayerKvView& kv, int num_kv_heads,
                          int page_size, int head_dim, DType native) {
  const Tensor &k = kv.k, &v = kv.v, &k_scale = kv.k_scale, &v_scale = kv.v_scale;
  const bool k_from_v = kv.k_from_v;
  if (k_from_v && (k.valid() || k_scale.valid())) {
    return InvalidArgumentError("{}: a K array given for a layer that derives K from V", op);
  }
  if (!k_from_v && !k.valid()) return InvalidArgumentError("{}: no K array", op);
  // Checked against V's geometry (K, when present, must match it).
  for (const Tensor* t : {&k, &v}) {
    if (k_from_v && t == &k) continue;
    if (t->rank != 4 || t->dim(0) != v.dim(0) || t->dim(1) != num_kv_heads ||
        t->dim(2) != page_size || t->dim(3) != head_dim || !t->contiguous()) {
      return InvalidArgumentError(
          "{}: the KV cache is not [pages, {} kv heads, page size {}, head dim {}]", op,
          num_kv_heads, page_size, head_dim);
    }
  }
  if ((!k_from_v && k.dtype != v.dtype) || (v.dtype != native && v.dtype != DType::kF8E4M3)) {
    return InvalidArgumentError("{}: KV cache of {}/{}; this backend stores {} or F8_E4M3", op,
                                k_from_v ? "-" : DTypeName(k.dtype), DTypeName(v.dtype),
                                DTypeName(native));
  }
  const bool fp8 = v.dtype == DType::kF8E4M3;
  for (const Tensor* s : {&k_scale, &v_scale}) {
    if (k_from_v && s == &k_scale) continue;
    if (!fp8) {
      if (s->valid())
        return InvalidArgumentError("{}: scale arrays given for a {} KV cache", op,
                                    DTypeName(v.dtype));
      continue;
    }
    if (!s->valid() || s->dtype != DType::kF32 || s->rank != 3 || s->dim(0) != v.dim(0) ||
        s->dim(1) != num_kv_heads || s->dim(2) != page_size || !s->contiguous()) {
      return InvalidArgumentError(
          "{}: an FP8 KV cache needs f32 scale arrays [{} pages, {} kv heads, {}] for K and V", op,
          v.dim(0), num_kv_heads, page_size);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckKFromV(std::string_view op, const Tensor& k_norm, int rotated_pairs,
                         int head_dim) {
  if (!k_norm.valid() || k_norm.dtype != DType::kF32 || k_norm.numel() != head_dim) {
    return InvalidArgumentError("{}: deriving K from V needs a [{}] f32 k_norm weight", op,
                                head_dim);
  }
  if (head_dim % 2 != 0 || rotated_pairs < 0 || rotated_pairs > head_dim / 2) {
    return InvalidArgumentError("{}: {} rotated pairs on head dim {}", op, rotated_pairs, head_dim);
  }
  return absl::OkStatus();
}

}  // namespace gannet::backend
