#include "lib/vision/vision_tower.h"

#include <cmath>
#include <map>
#include <string>

#include "lib/common/status.h"

namespace gannet::vision {
namespace {

using backend::Buffer;
using backend::Tensor;

struct DeviceLinear {
  Tensor w;
  ClipBounds clip;
};

struct DeviceLayer {
  Tensor input_norm, post_attn_norm, pre_ff_norm, post_ff_norm, q_norm, k_norm;
  DeviceLinear q, k, v, o, gate, up, down;
};

bool Finite(float v) { return std::isfinite(v); }

// The host side of one Encode: real patches gathered, positions, segments and pooling cells.
struct Batch {
  std::vector<float> pixels;  // [T, patch_dim], already 2 * (x - 0.5)
  std::vector<int32_t> pos;   // [T, 2]
  std::vector<int32_t> xs;    // [T]
  std::vector<int32_t> ys;    // [T]
  std::vector<int32_t> dest;  // [T] pooled row
  std::vector<int32_t> seg;   // [S + 1]
  std::vector<int> cells;     // per image, its pooled rows
  int64_t rows = 0, pooled_rows = 0;
};

absl::StatusOr<Batch> Gather(const model::VisionConfig& c, std::span<const ImagePatches> images) {
  if (images.empty()) return InvalidArgumentError("vision tower: no images to encode");
  const int64_t pd = c.patch_dim();
  const int64_t k = c.pooling_kernel_size, k2 = k * k;
  Batch b;
  b.seg.push_back(0);
  for (size_t i = 0; i < images.size(); ++i) {
    const ImagePatches& im = images[i];
    if (im.positions.size() % 2 != 0 || im.positions.empty()) {
      return InvalidArgumentError("image {}: positions must be [max_patches, 2], got {} values", i,
                                  im.positions.size());
    }
    const int64_t max_patches = static_cast<int64_t>(im.positions.size() / 2);
    if (static_cast<int64_t>(im.pixel_values.size()) != max_patches * pd) {
      return InvalidArgumentError(
          "image {}: pixel_values has {} values, expected max_patches ({}) x {} (3 x {}^2)", i,
          im.pixel_values.size(), max_patches, pd, c.patch_size);
    }
    if (max_patches % k2 != 0) {
      return InvalidArgumentError(
          "image {}: max_patches ({}) is not a multiple of {} (the {}x{} "
          "pooling kernel)",
          i, max_patches, k2, k, k);
    }
    // Real patches, and the pooled grid's width as HF derives it: the largest x + 1.
    std::vector<int64_t> real;
    int32_t max_x = 0;
    for (int64_t p = 0; p < max_patches; ++p) {
      const int32_t x = im.positions[2 * p], y = im.positions[2 * p + 1];
      if (x == -1 && y == -1) continue;
      if (x < 0 || y < 0 || x >= c.position_embedding_size || y >= c.position_embedding_size) {
        return InvalidArgumentError(
            "image {}: patch {} has position ({}, {}); positions must be in [0, {}) or (-1, -1) "
            "for padding",
            i, p, x, y, c.position_embedding_size);
      }
      real.push_back(p);
      max_x = std::max(max_x, x);
    }
    if (real.empty()) return InvalidArgumentError("image {}: no real patch (all padding)", i);
    const int64_t length = max_patches / k2;
    const int64_t cells_per_row = (int64_t{max_x} + 1) / k;
    std::map<int64_t, int32_t> cell_row;  // pooled cell -> its output row (cell order)
    std::vector<int64_t> cell_of(real.size());
    for (size_t j = 0; j < real.size(); ++j) {
      const int64_t p = real[j];
      const int64_t x = im.positions[2 * p], y = im.positions[2 * p + 1];
      const int64_t cell = x / k + cells_per_row * (y / k);
      if (cell >= length) {
        return InvalidArgumentError(
            "image {}: patch {} at ({}, {}) pools into cell {}, past the {} soft tokens "
            "max_patches allows",
            i, p, x, y, cell, length);
      }
      cell_of[j] = cell;
      cell_row[cell] = 0;
    }
    int32_t next = static_cast<int32_t>(b.pooled_rows);
    for (auto& [cell, row] : cell_row) row = next++;
    for (size_t j = 0; j < real.size(); ++j) {
      const int64_t p = real[j];
      const float* px = im.pixel_values.data() + p * pd;
      for (int64_t e = 0; e < pd; ++e) {
        if (!Finite(px[e])) {
          return InvalidArgumentError("image {}: patch {} holds a non-finite pixel value", i, p);
        }
        b.pixels.push_back(2.0f * (px[e] - 0.5f));
      }
      const int32_t x = im.positions[2 * p], y = im.positions[2 * p + 1];
      b.pos.push_back(x);
      b.pos.push_back(y);
      b.xs.push_back(x);
      b.ys.push_back(y);
      b.dest.push_back(cell_row[cell_of[j]]);
    }
    b.rows += static_cast<int64_t>(real.size());
    b.pooled_rows = next;
    b.seg.push_back(static_cast<int32_t>(b.rows));
    b.cells.push_back(static_cast<int>(cell_row.size()));
  }
  return b;
}

}  // namespace

struct VisionTower::Impl {
  std::vector<backend::OwnedTensor> storage;
  Tensor input_proj, table_x, table_y, std_bias, std_scale, projection;
  std::vector<DeviceLayer> layers;
};

VisionTower::VisionTower(backend::Backend* backend, const model::ModelConfig& config)
    : backend_(backend),
      vc_(*config.vision),
      text_hidden_(config.text.hidden_size),
      impl_(std::make_unique<Impl>()) {}

VisionTower::~VisionTower() = default;

absl::StatusOr<std::unique_ptr<VisionTower>> VisionTower::Create(backend::Backend* backend,
                                                                 const model::ModelConfig& config,
                                                                 const VisionWeights& w) {
  if (!config.vision)
    return FailedPreconditionError("vision tower: the config has no vision_config");
  if (static_cast<int>(w.layers.size()) != config.vision->num_hidden_layers) {
    return InvalidArgumentError("vision tower: {} layers of weights for a {}-layer config",
                                w.layers.size(), config.vision->num_hidden_layers);
  }
  std::unique_ptr<VisionTower> t(new VisionTower(backend, config));
  Impl& d = *t->impl_;
  auto load = [&](const model::WeightView& v, Tensor* out) -> absl::Status {
    const model::WeightView* parts[] = {&v};
    absl::StatusOr<backend::OwnedTensor> loaded = backend->LoadWeight(parts);
    if (!loaded.ok()) return Annotate(loaded.status(), "loading vision weight '" + v.name + "'");
    *out = loaded->tensor;
    d.storage.push_back(*std::move(loaded));
    return absl::OkStatus();
  };
  auto linear = [&](const VisionLinear& l, DeviceLinear* out) {
    out->clip = l.clip;
    return load(l.weight, &out->w);
  };
  GANNET_RETURN_IF_ERROR(load(w.input_proj, &d.input_proj));
  Tensor table;
  GANNET_RETURN_IF_ERROR(load(w.position_table, &table));
  // The table [2, P, H] seen as its two halves [P, H]: x rows, then y rows.
  const int64_t p = table.dim(1), h = table.dim(2);
  d.table_x = Tensor::Make(table.data, table.dtype, {p, h});
  d.table_y = Tensor::Make(static_cast<char*>(table.data) + p * h * table.elem_bytes(), table.dtype,
                           {p, h});
  if (config.vision->standardize) {
    GANNET_RETURN_IF_ERROR(load(w.std_bias, &d.std_bias));
    GANNET_RETURN_IF_ERROR(load(w.std_scale, &d.std_scale));
  }
  GANNET_RETURN_IF_ERROR(load(w.embedding_projection, &d.projection));
  for (const VisionLayerWeights& lw : w.layers) {
    DeviceLayer& dl = d.layers.emplace_back();
    GANNET_RETURN_IF_ERROR(load(lw.input_layernorm, &dl.input_norm));
    GANNET_RETURN_IF_ERROR(load(lw.post_attention_layernorm, &dl.post_attn_norm));
    GANNET_RETURN_IF_ERROR(load(lw.pre_feedforward_layernorm, &dl.pre_ff_norm));
    GANNET_RETURN_IF_ERROR(load(lw.post_feedforward_layernorm, &dl.post_ff_norm));
    GANNET_RETURN_IF_ERROR(load(lw.q_norm, &dl.q_norm));
    GANNET_RETURN_IF_ERROR(load(lw.k_norm, &dl.k_norm));
    GANNET_RETURN_IF_ERROR(linear(lw.q_proj, &dl.q));
    GANNET_RETURN_IF_ERROR(linear(lw.k_proj, &dl.k));
    GANNET_RETURN_IF_ERROR(linear(lw.v_proj, &dl.v));
    GANNET_RETURN_IF_ERROR(linear(lw.o_proj, &dl.o));
    GANNET_RETURN_IF_ERROR(linear(lw.gate_proj, &dl.gate));
    GANNET_RETURN_IF_ERROR(linear(lw.up_proj, &dl.up));
    GANNET_RETURN_IF_ERROR(linear(lw.down_proj, &dl.down));
  }
  return t;
}

absl::StatusOr<VisionOutput> VisionTower::Encode(std::span<const ImagePatches> images,
                                                 VisionTrace* trace) {
  GANNET_ASSIGN_OR_RETURN(Batch b, Gather(vc_, images));
  backend::Backend& be = *backend_;
  const Impl& d = *impl_;
  const int64_t t = b.rows, c = b.pooled_rows, h = vc_.hidden_size, hd = vc_.head_dim;
  const int64_t nq = vc_.num_attention_heads, nkv = vc_.num_key_value_heads;
  const int64_t inter = vc_.intermediate_size, pd = vc_.patch_dim();
  const float eps = static_cast<float>(vc_.rms_norm_eps);

  std::vector<Buffer> buffers;
  auto alloc = [&](DType dt, std::initializer_list<int64_t> dims) -> absl::StatusOr<Tensor> {
    int64_t n = 1;
    for (int64_t v : dims) n *= v;
    GANNET_ASSIGN_OR_RETURN(Buffer buf, be.Allocate(static_cast<size_t>(n) * DTypeBits(dt) / 8));
    Tensor out = Tensor::Make(buf.data(), dt, dims);
    buffers.push_back(std::move(buf));
    return out;
  };
  auto upload = [&](const auto& host, Tensor dst) {
    return be.CopyToDevice(dst.data, host.data(), host.size() * sizeof(host[0]));
  };
  auto download = [&](Tensor src, std::vector<float>* out) {
    out->resize(static_cast<size_t>(src.numel()));
    return be.CopyToHost(out->data(), src.data, out->size() * sizeof(float));
  };
  const int64_t wide = std::max({h, inter, nq * hd});
  GANNET_ASSIGN_OR_RETURN(Tensor pix, alloc(DType::kF32, {t, pd}));
  GANNET_ASSIGN_OR_RETURN(Tensor pos, alloc(DType::kI32, {t, 2}));
  GANNET_ASSIGN_OR_RETURN(Tensor xs, alloc(DType::kI32, {t}));
  GANNET_ASSIGN_OR_RETURN(Tensor ys, alloc(DType::kI32, {t}));
  GANNET_ASSIGN_OR_RETURN(Tensor dest, alloc(DType::kI32, {t}));
  GANNET_ASSIGN_OR_RETURN(Tensor seg, alloc(DType::kI32, {static_cast<int64_t>(b.seg.size())}));
  GANNET_ASSIGN_OR_RETURN(Tensor x, alloc(DType::kF32, {t, h}));  // the residual stream
  GANNET_ASSIGN_OR_RETURN(Tensor n, alloc(DType::kF32, {t, h}));  // normed input
  GANNET_ASSIGN_OR_RETURN(Tensor y, alloc(DType::kF32, {t, h}));  // a branch's output
  GANNET_ASSIGN_OR_RETURN(Tensor q, alloc(DType::kF32, {t, nq * hd}));
  GANNET_ASSIGN_OR_RETURN(Tensor k, alloc(DType::kF32, {t, nkv * hd}));
  GANNET_ASSIGN_OR_RETURN(Tensor v, alloc(DType::kF32, {t, nkv * hd}));
  GANNET_ASSIGN_OR_RETURN(Tensor attn, alloc(DType::kF32, {t, nq * hd}));
  GANNET_ASSIGN_OR_RETURN(Tensor gate, alloc(DType::kF32, {t, inter}));
  GANNET_ASSIGN_OR_RETURN(Tensor up, alloc(DType::kF32, {t, inter}));
  GANNET_ASSIGN_OR_RETURN(Tensor clipped, alloc(DType::kF32, {t * wide}));
  GANNET_ASSIGN_OR_RETURN(Tensor pooled, alloc(DType::kF32, {c, h}));
  GANNET_ASSIGN_OR_RETURN(Tensor normed, alloc(DType::kF32, {c, h}));
  GANNET_ASSIGN_OR_RETURN(Tensor out, alloc(DType::kF32, {c, text_hidden_}));
  GANNET_RETURN_IF_ERROR(upload(b.pixels, pix));
  GANNET_RETURN_IF_ERROR(upload(b.pos, pos));
  GANNET_RETURN_IF_ERROR(upload(b.xs, xs));
  GANNET_RETURN_IF_ERROR(upload(b.ys, ys));
  GANNET_RETURN_IF_ERROR(upload(b.dest, dest));
  GANNET_RETURN_IF_ERROR(upload(b.seg, seg));

  // A clipped linear: clamp the input (into scratch: the input feeds other linears too), the
  // product, clamp the output in place. Infinite bounds (plain linears) skip the clamps.
  auto linear = [&](Tensor in, const DeviceLinear& l, Tensor o) -> absl::Status {
    Tensor src = in;
    if (Finite(l.clip.in_min) || Finite(l.clip.in_max)) {
      src = Tensor::Make(clipped.data, DType::kF32, {in.rows(), in.row_elems()});
      GANNET_RETURN_IF_ERROR(be.Clamp(in, l.clip.in_min, l.clip.in_max, src));
    }
    GANNET_RETURN_IF_ERROR(be.Linear(src, l.w, o));
    if (Finite(l.clip.out_min) || Finite(l.clip.out_max)) {
      GANNET_RETURN_IF_ERROR(be.Clamp(o, l.clip.out_min, l.clip.out_max, o));
    }
    return absl::OkStatus();
  };
  // Per-head views: [T, heads, d] for the RoPE, [T * heads, d] for the norms.
  auto heads = [&](Tensor a, int64_t count) { return a.Reshape({t, count, hd}); };
  auto head_rows = [&](Tensor a, int64_t count) { return a.Reshape({t * count, hd}); };

  // Patch embedding: the projection plus the x and y position rows.
  GANNET_RETURN_IF_ERROR(be.Linear(pix, d.input_proj, x));
  GANNET_RETURN_IF_ERROR(be.Embed(xs, d.table_x, 1.0f, n));
  GANNET_RETURN_IF_ERROR(be.Embed(ys, d.table_y, 1.0f, y));
  GANNET_RETURN_IF_ERROR(be.Add(n, y, n));
  GANNET_RETURN_IF_ERROR(be.Add(x, n, x));
  if (trace != nullptr) {
    GANNET_RETURN_IF_ERROR(be.Synchronize());
    GANNET_RETURN_IF_ERROR(download(x, &trace->embed));
    trace->layers.assign(d.layers.size(), {});
  }

  backend::SegmentAttentionArgs sa;
  sa.q = heads(q, nq);
  sa.k = heads(k, nkv);
  sa.v = heads(v, nkv);
  sa.out = heads(attn, nq);
  sa.num_q_heads = static_cast<int>(nq);
  sa.num_kv_heads = static_cast<int>(nkv);
  sa.head_dim = static_cast<int>(hd);
  sa.scale = 1.0f;
  sa.seg_start = seg;
  sa.host_seg_start = b.seg.data();
  sa.num_segments = static_cast<int>(b.seg.size()) - 1;
  const float theta = static_cast<float>(vc_.rope_theta);
  for (size_t l = 0; l < d.layers.size(); ++l) {
    const DeviceLayer& dl = d.layers[l];
    GANNET_RETURN_IF_ERROR(be.RmsNorm(x, dl.input_norm, eps, n));
    GANNET_RETURN_IF_ERROR(linear(n, dl.q, q));
    GANNET_RETURN_IF_ERROR(linear(n, dl.k, k));
    GANNET_RETURN_IF_ERROR(linear(n, dl.v, v));
    GANNET_RETURN_IF_ERROR(be.RmsNorm(head_rows(q, nq), dl.q_norm, eps, head_rows(q, nq)));
    GANNET_RETURN_IF_ERROR(be.RmsNorm(head_rows(k, nkv), dl.k_norm, eps, head_rows(k, nkv)));
    GANNET_RETURN_IF_ERROR(be.RmsNorm(head_rows(v, nkv), Tensor{}, eps, head_rows(v, nkv)));
    GANNET_RETURN_IF_ERROR(be.VisionRope(heads(q, nq), pos, theta));
    GANNET_RETURN_IF_ERROR(be.VisionRope(heads(k, nkv), pos, theta));
    GANNET_RETURN_IF_ERROR(be.SegmentAttention(sa));
    GANNET_RETURN_IF_ERROR(linear(attn, dl.o, y));
    GANNET_RETURN_IF_ERROR(be.RmsNorm(y, dl.post_attn_norm, eps, y));
    GANNET_RETURN_IF_ERROR(be.Add(x, y, x));
    GANNET_RETURN_IF_ERROR(be.RmsNorm(x, dl.pre_ff_norm, eps, n));
    GANNET_RETURN_IF_ERROR(linear(n, dl.gate, gate));
    GANNET_RETURN_IF_ERROR(linear(n, dl.up, up));
    GANNET_RETURN_IF_ERROR(be.GeluTanhMul(gate, up, gate));
    GANNET_RETURN_IF_ERROR(linear(gate, dl.down, y));
    GANNET_RETURN_IF_ERROR(be.RmsNorm(y, dl.post_ff_norm, eps, y));
    GANNET_RETURN_IF_ERROR(be.Add(x, y, x));
    if (trace != nullptr) {
      GANNET_RETURN_IF_ERROR(be.Synchronize());
      GANNET_RETURN_IF_ERROR(download(x, &trace->layers[l]));
    }
  }

  // Average over each k x k cell, then x sqrt(H): one scale of sqrt(H) / k^2.
  const float k2 = static_cast<float>(vc_.pooling_kernel_size * vc_.pooling_kernel_size);
  const float pool_scale = std::sqrt(static_cast<float>(h)) / k2;
  GANNET_RETURN_IF_ERROR(be.ScatterSumRows(x, dest, pool_scale, pooled));
  if (trace != nullptr) {
    GANNET_RETURN_IF_ERROR(be.Synchronize());
    GANNET_RETURN_IF_ERROR(download(pooled, &trace->pooled));
  }
  if (vc_.standardize) GANNET_RETURN_IF_ERROR(be.Standardize(pooled, d.std_bias, d.std_scale));
  if (trace != nullptr) {
    GANNET_RETURN_IF_ERROR(be.Synchronize());
    GANNET_RETURN_IF_ERROR(download(pooled, &trace->standardized));
  }
  // The projector: RMSNorm without a weight, then the linear into the text width.
  GANNET_RETURN_IF_ERROR(be.RmsNorm(pooled, Tensor{}, eps, normed));
  GANNET_RETURN_IF_ERROR(be.Linear(normed, d.projection, out));
  GANNET_RETURN_IF_ERROR(be.Synchronize());
  VisionOutput result;
  GANNET_RETURN_IF_ERROR(download(out, &result.soft_tokens));
  result.tokens_per_image = b.cells;
  return result;
}

}  // namespace gannet::vision
