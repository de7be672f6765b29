// Embedding, norms, elementwise ops, PLE combine, gather and softcap of the CPU backend.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cpu/cpu_math.h"

namespace gannet::backend {

using cpu::LoadF32;
using cpu::RequireDenseWeight;
using cpu::RequireF32;

absl::Status CpuBackend::Embed(Tensor ids, Tensor table, float scale, Tensor out) {
  GANNET_RETURN_IF_ERROR(RequireF32(out, "Embed output"));
  GANNET_RETURN_IF_ERROR(RequireDenseWeight(table, "Embed table"));
  const int64_t n = ids.numel();
  const int64_t vocab = table.dim(0);
  const int64_t width = table.row_elems();
  if (out.rows() != n || out.row_elems() != width) {
    return InvalidArgumentError("Embed: output shape does not match [{}, {}]", n, width);
  }
  for (int64_t t = 0; t < n; ++t) {
    int32_t id = ids.as<int32_t>()[t];
    if (id < -1 || id >= vocab) {
      return InvalidArgumentError("Embed: token id {} outside the table's {} rows", id, vocab);
    }
  }
  pool().ParallelFor(n, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t id = ids.as<int32_t>()[t];
      float* o = out.as<float>() + t * out.stride0();
      if (id < 0) {  // another rank's vocabulary shard
        std::fill(o, o + width, 0.0f);
        continue;
      }
      ElementsToF32(static_cast<const char*>(table.data) + id * width * table.elem_bytes(),
                    table.dtype, width, o);
      for (int64_t i = 0; i < width; ++i) o[i] *= scale;
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::RmsNorm(Tensor x, Tensor weight, float eps, Tensor out) {
  GANNET_RETURN_IF_ERROR(RequireF32(x, "RmsNorm input"));
  GANNET_RETURN_IF_ERROR(RequireF32(out, "RmsNorm output"));
  const int64_t n = x.shape[x.rank - 1];
  if (weight.valid() && weight.numel() != n) {
    return InvalidArgumentError("RmsNorm: weight has {} elements, rows have {}", weight.numel(), n);
  }
  if (!x.contiguous() || !out.contiguous()) {
    return InvalidArgumentError("RmsNorm: tensors must be contiguous");
  }
  const int64_t rows = x.numel() / n;
  const float* w = weight.valid() ? weight.as<float>() : nullptr;
  pool().ParallelFor(rows, 16, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xi = x.as<float>() + r * n;
      float* o = out.as<float>() + r * n;
      float inv = cpu::RmsInvScale(xi, n, eps);
      for (int64_t i = 0; i < n; ++i) o[i] = w ? (xi[i] * inv) * w[i] : xi[i] * inv;
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::PostNormResidual(Tensor x, Tensor post_weight, Tensor residual,
                                          Tensor scalar, Tensor next_weight, Tensor next_out,
                                          float eps) {
  GANNET_RETURN_IF_ERROR(RequireF32(x, "PostNormResidual input"));
  GANNET_RETURN_IF_ERROR(RequireF32(residual, "PostNormResidual residual"));
  const int64_t rows = x.rows();
  const int64_t n = x.row_elems();
  GANNET_RETURN_IF_ERROR(
      CheckPostNormResidualArgs(rows, n, post_weight, residual, scalar, next_weight, next_out));
  const float* pw = post_weight.as<float>();
  const float s = scalar.valid() ? scalar.as<float>()[0] : 1.0f;
  const float* nw = next_weight.valid() ? next_weight.as<float>() : nullptr;
  pool().ParallelFor(rows, 8, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xi = x.as<float>() + r * x.stride0();
      float* res = residual.as<float>() + r * residual.stride0();
      float inv = cpu::RmsInvScale(xi, n, eps);
      for (int64_t i = 0; i < n; ++i) res[i] = res[i] + (xi[i] * inv) * pw[i];
      if (scalar.valid()) {
        for (int64_t i = 0; i < n; ++i) res[i] *= s;
      }
      if (next_out.valid()) {
        float* o = next_out.as<float>() + r * next_out.stride0();
        float inv2 = cpu::RmsInvScale(res, n, eps);
        for (int64_t i = 0; i < n; ++i) o[i] = nw ? (res[i] * inv2) * nw[i] : res[i] * inv2;
      }
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::GeluTanhMul(Tensor gate, Tensor up, Tensor out) {
  GANNET_RETURN_IF_ERROR(RequireF32(gate, "GeluTanhMul gate"));
  GANNET_RETURN_IF_ERROR(RequireF32(up, "GeluTanhMul up"));
  if (gate.rows() != up.rows() || gate.row_elems() != up.row_elems() || out.rows() != gate.rows() ||
      out.row_elems() != gate.row_elems()) {
    return InvalidArgumentError("GeluTanhMul: shape mismatch");
  }
  const int64_t n = gate.row_elems();
  pool().ParallelFor(gate.rows(), 4, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* g = gate.as<float>() + r * gate.stride0();
      const float* u = up.as<float>() + r * up.stride0();
      float* o = out.as<float>() + r * out.stride0();
      for (int64_t i = 0; i < n; ++i) o[i] = cpu::GeluTanh(g[i]) * u[i];
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::Add(Tensor a, Tensor b, Tensor out) {
  if (a.rows() != b.rows() || a.row_elems() != b.row_elems() || out.rows() != a.rows() ||
      out.row_elems() != a.row_elems()) {
    return InvalidArgumentError("Add: shape mismatch");
  }
  const int64_t n = a.row_elems();
  for (int64_t r = 0; r < a.rows(); ++r) {
    const float* x = a.as<float>() + r * a.stride0();
    const float* y = b.as<float>() + r * b.stride0();
    float* o = out.as<float>() + r * out.stride0();
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::PleCombine(Tensor proj, Tensor token_part, Tensor norm_w, float proj_scale,
                                    float combine_scale, float eps, Tensor out) {
  const int64_t p = norm_w.numel();
  const int64_t width = proj.row_elems();
  GANNET_RETURN_IF_ERROR(CheckPleCombineArgs(proj.rows(), width, token_part, norm_w, out));
  const float* w = norm_w.as<float>();
  pool().ParallelFor(proj.rows(), 1, [&](int64_t b, int64_t e) {
    std::vector<float> tmp(p);
    for (int64_t r = b; r < e; ++r) {
      for (int64_t g = 0; g < width / p; ++g) {
        const float* pr = proj.as<float>() + r * proj.stride0() + g * p;
        const float* tk = token_part.as<float>() + r * token_part.stride0() + g * p;
        float* o = out.as<float>() + r * out.stride0() + g * p;
        for (int64_t i = 0; i < p; ++i) tmp[i] = pr[i] * proj_scale;
        float inv = cpu::RmsInvScale(tmp.data(), p, eps);
        for (int64_t i = 0; i < p; ++i) o[i] = ((tmp[i] * inv) * w[i] + tk[i]) * combine_scale;
      }
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::GatherRows(Tensor x, Tensor rows, Tensor out) {
  GANNET_RETURN_IF_ERROR(CheckGatherRowsArgs(x, rows, out));
  GANNET_RETURN_IF_ERROR(RequireDenseWeight(x, "GatherRows source"));
  const int64_t n = x.row_elems();
  for (int64_t i = 0; i < rows.numel(); ++i) {
    int32_t r = rows.as<int32_t>()[i];
    if (r < 0 || r >= x.rows()) return InvalidArgumentError("GatherRows: row {} out of range", r);
    std::memcpy(out.as<char>() + i * out.stride0() * out.elem_bytes(),
                x.as<char>() + r * x.stride0() * x.elem_bytes(), n * x.elem_bytes());
  }
  return absl::OkStatus();
}

// The top_k clusters of a row by logit, best first, ties to the lower index (the CUDA kernel's
// order).
static std::vector<int32_t> TopClusters(const float* c, int64_t num, int64_t top_k) {
  std::vector<uint8_t> taken(num, 0);
  std::vector<int32_t> order;
  for (int64_t k = 0; k < top_k; ++k) {
    int64_t best = -1;
    for (int64_t i = 0; i < num; ++i) {
      if (!taken[i] && (best < 0 || c[i] > c[best])) best = i;
    }
    taken[best] = 1;
    order.push_back(static_cast<int32_t>(best));
  }
  return order;
}

absl::Status CpuBackend::CentroidLogits(Tensor h, Tensor table, Tensor clusters, Tensor ordering,
                                        Tensor selected, Tensor logits) {
  GANNET_RETURN_IF_ERROR(CheckCentroidLogitsArgs(h, table, clusters, ordering, selected, logits));
  GANNET_RETURN_IF_ERROR(RequireF32(h, "CentroidLogits h"));
  GANNET_RETURN_IF_ERROR(RequireDenseWeight(table, "CentroidLogits table"));
  const int64_t vocab = logits.row_elems(), width = h.row_elems(), per = ordering.dim(1);
  const int32_t* ids = ordering.as<int32_t>();
  for (int64_t i = 0; i < ordering.numel(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return InvalidArgumentError("CentroidLogits: ordering entry {} = {} is outside [0, {})", i,
                                  ids[i], vocab);
    }
  }
  std::vector<float> w(width);
  for (int64_t r = 0; r < h.rows(); ++r) {
    std::vector<int32_t> top = TopClusters(clusters.as<float>() + r * clusters.stride0(),
                                           clusters.row_elems(), selected.row_elems());
    std::sort(top.begin(), top.end());  // `selected` lists them in ascending order
    std::copy(top.begin(), top.end(), selected.as<int32_t>() + r * selected.stride0());
    float* row = logits.as<float>() + r * logits.stride0();
    std::fill(row, row + vocab, -INFINITY);
    const float* x = h.as<float>() + r * h.stride0();
    for (int32_t c : top) {
      for (int64_t t = 0; t < per; ++t) {
        const int32_t id = ids[c * per + t];
        ElementsToF32(static_cast<const char*>(table.data) + id * width * table.elem_bytes(),
                      table.dtype, width, w.data());
        float acc = 0.0f;
        for (int64_t i = 0; i < width; ++i) acc += x[i] * w[i];
        row[id] = acc;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Softcap(Tensor x, float cap) {
  GANNET_RETURN_IF_ERROR(RequireF32(x, "Softcap input"));
  pool().ParallelFor(x.rows(), 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* v = x.as<float>() + r * x.stride0();
      for (int64_t i = 0; i < x.row_elems(); ++i) v[i] = std::tanh(v[i] / cap) * cap;
    }
  });
  return absl::OkStatus();
}

}  // namespace gannet::backend
