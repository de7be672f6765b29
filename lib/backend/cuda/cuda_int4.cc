// int4 (W4A16) weights on the CUDA backend: loading (the canonical form of lib/quant/int4.h
// repacked into the kernels' device form, kernels/quant/int4_layout.h) and the linear layer.
//
// Which kernel runs a linear layer of M rows (docs/int4-kernels.md, "In the backend"):
//   M <= 32 (sm_80+)   the registry's int4 entry: the tensor-core GEMV, 1, 2 or 4 column tiles of
//   M <= 8 (Volta)     8 rows (SIMT on Volta): the decode path, reading the packed weight once;
//   33 <= M <= 64      (sm_80+) the GEMV over the rows in chunks of 32: the weight read twice, a
//                      byte an element, against 4.5 for dequantizing it;
//   larger M           the weight dequantized to the compute type a slice of rows at a time into a
//                      fixed scratch (kInt4DenseSliceBytes) and multiplied by cuBLASLt, as a bf16
//                      weight is: prefill is compute-bound, and the dequantization reads half a
//                      byte and writes two per weight element, against the GEMM's 2 * M FLOPs.
// The int4 MMA GEMM (kernels/quant) is not taken: at M >= 16 it measured 3-6x slower than
// cuBLASLt on the dense weight (H100, docs/results-log/int4.md).
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "kernels/quant/int4_entries.h"
#include "kernels/quant/int4_linear.h"
#include "kernels/quant/int4_repack.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/backend/cuda/cuda_linear.h"
#include "lib/backend/cuda/cuda_status.h"
#include "lib/backend/cuda/cuda_util.h"
#include "lib/common/status.h"
#include "lib/common/thread_pool.h"
#include "lib/model/quantized_weights.h"

namespace gannet::backend {
namespace {

// Rows up to which the GEMV runs in chunks (see above), and the dense scratch of larger M.
constexpr int64_t kInt4ChunkedMaxM = 64;
constexpr size_t kInt4DenseSliceBytes = size_t{64} << 20;

size_t AlignUp(size_t v) { return (v + 255) / 256 * 256; }

// The device form of `t` (a weight LoadInt4Weight made).
kernels::Int4Layout LayoutOf(const Tensor& t) {
  return kernels::Int4LayoutOf(t.format, t.dim(0), t.row_elems());
}

// Rows of each dense slice: as many whole row blocks as kInt4DenseSliceBytes holds at k inputs
// (at least one block).
int64_t SliceRows(int64_t n, int64_t k, DType type) {
  const int64_t per_row = k * (DTypeBits(type) / 8);
  int64_t rows = static_cast<int64_t>(kInt4DenseSliceBytes) / per_row;
  rows = std::max<int64_t>(kernels::kInt4RowBlock,
                           rows / kernels::kInt4RowBlock * kernels::kInt4RowBlock);
  return std::min(rows, n);
}

// The device form of `parts`' canonical forms one after the other (n rows of k), repacked on
// `threads` threads.
absl::StatusOr<kernels::Int4Repacked> RepackParts(std::span<const model::WeightView* const> parts,
                                                  int64_t n, int64_t k, int threads) {
  const WeightFormat& f = parts[0]->format;
  const int64_t groups = k / f.group_size;
  const int64_t scale_size = DTypeBits(f.scale) / 8;
  std::vector<uint8_t> packed(static_cast<size_t>(n * k / 2));
  std::vector<uint8_t> scales(static_cast<size_t>(n * groups * scale_size));
  std::vector<uint8_t> zeros(f.zero_point ? static_cast<size_t>(n * groups) : 0);
  int64_t row = 0;
  for (const model::WeightView* p : parts) {
    GANNET_RETURN_IF_ERROR(model::WriteCanonicalInt4(
        *p, packed.data() + row * (k / 2), scales.data() + row * groups * scale_size,
        f.zero_point ? zeros.data() + row * groups : nullptr));
    row += p->shape[0];
  }
  kernels::Int4Repacked dev;
  const kernels::Int4Canonical src{packed.data(), scales.data(),
                                   f.zero_point ? zeros.data() : nullptr};
  if (const char* why = kernels::Int4Repack(f, n, k, src, &dev, threads)) {
    return InvalidArgumentError("LoadWeight: '{}': {}", parts[0]->name, why);
  }
  return dev;
}

// The tensor of a device form laid out in `buf` as tiles, scales (at packed_bytes) and zero
// points (at packed_bytes + scale_bytes).
OwnedTensor Int4Tensor(Buffer buf, const WeightFormat& f, int64_t n, int64_t k, size_t packed_bytes,
                       size_t scale_bytes) {
  char* base = static_cast<char*>(buf.data());
  Tensor t = Tensor::Make(base, f.elem, {n, k});
  t.format = f;
  t.scales = base + packed_bytes;
  t.zero_points =
      f.zero_point ? reinterpret_cast<const uint8_t*>(base + packed_bytes + scale_bytes) : nullptr;
  return OwnedTensor{std::move(buf), t};
}

}  // namespace

absl::StatusOr<OwnedTensor> CudaBackend::LoadInt4Weight(
    std::span<const model::WeightView* const> parts) {
  const model::WeightView& first = *parts[0];
  const WeightFormat& f = first.format;
  const bool synthetic = first.synthetic;
  for (const model::WeightView* p : parts) {
    if (!(p->format == f) || p->synthetic != synthetic ||
        (p->pieces.empty() && !p->quantize_at_load())) {
      return InvalidArgumentError(
          "LoadWeight: '{}' ({}) and '{}' ({}) cannot be concatenated: fused weights need one "
          "quantized format",
          first.name, WeightFormatName(f), p->name, WeightFormatName(p->format));
    }
  }
  if (first.shape.size() != 2) {
    return UnimplementedError(
        "LoadWeight: '{}' is an int4 expert weight ({}-D); the CUDA backend has no int4 MoE "
        "kernels yet: run it on the CPU backend or load the bf16 checkpoint",
        first.name, first.shape.size());
  }
  const int64_t k = first.shape[1];
  int64_t n = 0;
  for (const model::WeightView* p : parts) n += p->shape[0];
  if (const char* why = kernels::Int4FormatError(f, n, k)) {
    return UnimplementedError("LoadWeight: '{}' ({}, [{}, {}]): the CUDA int4 kernels {}",
                              first.name, WeightFormatName(f), n, k, why);
  }
  // The dense scratch of prefill-sized products and the GEMV's split-K partials at its largest
  // M, reserved now: the KV pools sized after loading leave room for them, and no captured step
  // finds them too small.
  const kernels::Int4Layout layout = kernels::Int4LayoutOf(f, n, k);
  GANNET_RETURN_IF_ERROR(ReserveWorkspace(
      WorkspaceId::kInt4Split,
      kernels::Int4GemvWorkspaceBytes(kernels::kInt4GemvMaxM, layout.n_pad,
                                      kernels::Int4GemvSplits(layout, device_.num_sms))));
  GANNET_RETURN_IF_ERROR(
      ReserveWorkspace(WorkspaceId::kInt4Dense,
                       static_cast<size_t>(SliceRows(n, k, act_) * k * (DTypeBits(act_) / 8))));
  if (synthetic) return LoadSyntheticInt4(first, n, k);
  // The repack is ~8 ns an element on one thread (a 31B checkpoint's 29e9 int4 weights: four
  // minutes); row blocks are independent, so it takes as many threads as the process's pool.
  GANNET_ASSIGN_OR_RETURN(const kernels::Int4Repacked dev,
                          RepackParts(parts, n, k, DefaultThreadPool().num_threads()));
  const size_t packed_bytes = AlignUp(dev.packed.size());
  const size_t scale_bytes = AlignUp(dev.scales.size());
  GANNET_ASSIGN_OR_RETURN(Buffer buf,
                          Allocate(packed_bytes + scale_bytes + dev.zero_points.size()));
  char* base = static_cast<char*>(buf.data());
  GANNET_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(base, dev.packed.data(), dev.packed.size(), cudaMemcpyHostToDevice));
  GANNET_CUDA_RETURN_IF_ERROR(cudaMemcpy(base + packed_bytes, dev.scales.data(), dev.scales.size(),
                                         cudaMemcpyHostToDevice));
  if (!dev.zero_points.empty()) {
    GANNET_CUDA_RETURN_IF_ERROR(cudaMemcpy(base + packed_bytes + scale_bytes,
                                           dev.zero_points.data(), dev.zero_points.size(),
                                           cudaMemcpyHostToDevice));
  }
  return Int4Tensor(std::move(buf), f, n, k, packed_bytes, scale_bytes);
}

absl::StatusOr<OwnedTensor> CudaBackend::LoadSyntheticInt4(const model::WeightView& first,
                                                           int64_t n, int64_t k) {
  // Generating and repacking every row on the host would take most of an hour for 31B: the first
  // row block (16 rows, the quantized synthetic values WriteCanonicalInt4 gives a synthetic view)
  // is repacked once and repeated over the weight's row blocks, tiles and scales alike (each is
  // stored a row block after the other). Values for speed measurements, not for outputs.
  const WeightFormat& f = first.format;
  const int64_t rb = kernels::kInt4RowBlock;
  model::WeightView block = first;
  block.shape = {rb, k};
  const model::WeightView* unit_parts[] = {&block};
  GANNET_ASSIGN_OR_RETURN(const kernels::Int4Repacked unit, RepackParts(unit_parts, rb, k, 1));
  const kernels::Int4Layout layout = kernels::Int4LayoutOf(f, n, k);
  const size_t packed_bytes = AlignUp(layout.packed_bytes());
  const size_t scale_bytes = AlignUp(layout.scale_bytes());
  GANNET_ASSIGN_OR_RETURN(Buffer buf, Allocate(packed_bytes + scale_bytes +
                                               static_cast<size_t>(layout.zero_point_bytes())));
  char* base = static_cast<char*>(buf.data());
  // One unit copied in, then doubled device to device.
  auto repeat = [&](char* dst, const std::vector<uint8_t>& u, int64_t total) -> absl::Status {
    if (total == 0) return absl::OkStatus();
    GANNET_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, u.data(), u.size(), cudaMemcpyHostToDevice));
    for (int64_t have = static_cast<int64_t>(u.size()); have < total; have *= 2) {
      GANNET_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(dst + have, dst, std::min(have, total - have), cudaMemcpyDeviceToDevice));
    }
    return absl::OkStatus();
  };
  GANNET_RETURN_IF_ERROR(repeat(base, unit.packed, layout.packed_bytes()));
  GANNET_RETURN_IF_ERROR(repeat(base + packed_bytes, unit.scales, layout.scale_bytes()));
  GANNET_RETURN_IF_ERROR(
      repeat(base + packed_bytes + scale_bytes, unit.zero_points, layout.zero_point_bytes()));
  return Int4Tensor(std::move(buf), f, n, k, packed_bytes, scale_bytes);
}

absl::StatusOr<const kernels::KernelEntry*> CudaLinear::Int4Entry(const kernels::ProblemKey& pk) {
  const auto key = std::tuple{pk.num_tokens,
                              pk.n,
                              pk.k,
                              pk.group_size,
                              static_cast<int>(pk.in_type),
                              static_cast<int>(pk.kv_type),
                              static_cast<int>(pk.out_type),
                              static_cast<int>(pk.scale_type),
                              pk.flags};
  const kernels::KernelEntry*& entry = int4_entries_[key];
  if (entry == nullptr) {
    const kernels::Selection sel = kernels::Select(pk, be_->device_info());
    if (sel.entry == nullptr) return InternalError("Linear (int4): {}", sel.error);
    entry = sel.entry;
  }
  return entry;
}

absl::StatusOr<CudaLinear::Choice> CudaLinear::RunInt4(const Tensor& x, const Tensor& w,
                                                       const Tensor& out) {
  const int64_t m = x.rows(), k = x.row_elems(), n = w.dim(0);
  if ((w.dtype != DType::kI4 && w.dtype != DType::kU4) ||
      w.format.granularity != ScaleGranularity::kGroup || w.format.input_perm) {
    return UnimplementedError("Linear: the CUDA backend has no kernels for {} weights",
                              WeightFormatName(w.format));
  }
  const DType act = be_->activation_dtype();
  for (const auto& [t, what] : {std::pair{&x, "x"}, std::pair{&out, "out"}}) {
    if (t->dtype != act && t->dtype != DType::kF32) {
      return InvalidArgumentError("Linear: {} must be {} (the compute type) or f32, got {}", what,
                                  DTypeName(act), DTypeName(t->dtype));
    }
  }
  if (w.row_elems() != k || out.rows() != m || out.row_elems() != n || w.rank != 2) {
    return InvalidArgumentError("Linear: x [{}, {}] @ w^T [{}, {}] -> out [{}, {}] mismatch", m, k,
                                w.dim(0), w.row_elems(), out.rows(), out.row_elems());
  }
  GANNET_RETURN_IF_ERROR(CheckInt32("Linear", {{"x rows M", m}, {"weight rows N", n}}));
  Choice used;
  if (m == 0) return used;
  // The kernels read x in the compute type: an f32 x goes through scratch.
  Tensor xc = x;
  if (x.dtype == DType::kF32) {
    const int64_t ld = (k + 7) / 8 * 8;
    GANNET_ASSIGN_OR_RETURN(void* ws, be_->Workspace(CudaBackend::WorkspaceId::kLinearInput,
                                                     static_cast<size_t>(m * ld) * 2));
    GANNET_RETURN_IF_ERROR(ConvertInput(x, ws, ld, act));
    xc = Tensor::Make(ws, act, {m, k});
    xc.row_stride = ld;
  }
  const kernels::Int4Layout layout = LayoutOf(w);
  const kernels::DeviceInfo& dev = be_->device_info();
  if (m <= (dev.sm >= 80 ? kInt4ChunkedMaxM : 8)) {
    for (int64_t r0 = 0; r0 < m; r0 += kernels::kInt4GemvMaxM) {
      kernels::Int4LinearParams p;
      p.m = static_cast<int>(std::min<int64_t>(kernels::kInt4GemvMaxM, m - r0));
      p.x = static_cast<const char*>(xc.data) + r0 * xc.stride0() * (DTypeBits(act) / 8);
      p.ldx = xc.stride0();
      p.out = static_cast<char*>(out.data) + r0 * out.stride0() * (DTypeBits(out.dtype) / 8);
      p.ldo = out.stride0();
      p.w = static_cast<const uint8_t*>(w.data);
      p.scales = w.scales;
      p.zero_points = w.zero_points;
      p.layout = layout;
      p.x_type = act;
      p.out_type = out.dtype;
      const kernels::ProblemKey pk = kernels::Int4Problem(p);
      GANNET_ASSIGN_OR_RETURN(const kernels::KernelEntry* entry, Int4Entry(pk));
      void* ws = nullptr;
      if (const size_t bytes = entry->workspace_bytes(pk, dev); bytes > 0) {
        GANNET_ASSIGN_OR_RETURN(ws, be_->Workspace(CudaBackend::WorkspaceId::kInt4Split, bytes));
      }
      GANNET_CUDA_RETURN_IF_ERROR(entry->launch(&p, pk, dev, ws, be_->stream()));
    }
    used.path = Path::kInt4Kernel;
    return used;
  }
  // Dequantized slices of rows, each multiplied as a dense weight (its own tuned plan).
  const int64_t slice = SliceRows(n, k, act);
  const size_t elem = DTypeBits(act) / 8;
  GANNET_ASSIGN_OR_RETURN(void* dense, be_->Workspace(CudaBackend::WorkspaceId::kInt4Dense,
                                                      static_cast<size_t>(slice * k) * elem));
  for (int64_t r0 = 0; r0 < n; r0 += slice) {
    const int64_t rows = std::min(slice, n - r0);
    const kernels::Int4RowSlice s = kernels::Int4RowsOf(layout, r0, rows);
    GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchInt4Dequantize(
        s.layout, static_cast<const uint8_t*>(w.data) + s.packed_offset,
        static_cast<const char*>(w.scales) + s.scale_offset,
        w.zero_points != nullptr ? w.zero_points + s.zero_point_offset : nullptr, act, dense,
        be_->stream()));
    const Tensor wd = Tensor::Make(dense, act, {rows, k});
    GANNET_ASSIGN_OR_RETURN(used, Run(xc, wd, rows == n ? out : out.Cols(r0, rows)));
  }
  used.path = Path::kInt4Dense;
  return used;
}

}  // namespace gannet::backend
