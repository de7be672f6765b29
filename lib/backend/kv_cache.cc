#include "lib/backend/kv_cache.h"

#include "lib/common/status.h"

namespace gannet::backend {

absl::Status CheckKvCache(std::string_view op, const Tensor& k, const Tensor& v, const Tensor& k_scale,
                          const Tensor& v_scale, int num_kv_heads, int page_size, int head_dim,
                          DType native) {
  for (const Tensor* t : {&k, &v}) {
    if (t->rank != 4 || t->dim(0) != k.dim(0) || t->dim(1) != num_kv_heads ||
        t->dim(2) != page_size || t->dim(3) != head_dim || !t->contiguous()) {
      return InvalidArgumentError(
          "{}: the KV cache is not [pages, {} kv heads, page size {}, head dim {}]", op,
          num_kv_heads, page_size, head_dim);
    }
  }
  if (k.dtype != v.dtype || (k.dtype != native && k.dtype != DType::kF8E4M3)) {
    return InvalidArgumentError("{}: KV cache of {}/{}; this backend stores {} or F8_E4M3", op,
                                DTypeName(k.dtype), DTypeName(v.dtype), DTypeName(native));
  }
  const bool fp8 = k.dtype == DType::kF8E4M3;
  for (const Tensor* s : {&k_scale, &v_scale}) {
    if (!fp8) {
      if (s->valid()) return InvalidArgumentError("{}: scale arrays given for a {} KV cache", op, DTypeName(k.dtype));
      continue;
    }
    if (!s->valid() || s->dtype != DType::kF32 || s->rank != 3 || s->dim(0) != k.dim(0) ||
        s->dim(1) != num_kv_heads || s->dim(2) != page_size || !s->contiguous()) {
      return InvalidArgumentError(
          "{}: an FP8 KV cache needs f32 scale arrays [{} pages, {} kv heads, {}] for K and V", op,
          k.dim(0), num_kv_heads, page_size);
    }
  }
  return absl::OkStatus();
}

}  // namespace gannet::backend
