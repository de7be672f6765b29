// CudaBackend: device, stream, memory, workspaces and weight loading (synthetic weights are
// generated on the GPU). The ops live in cuda_ops.cc, cuda_attention.cc, cuda_linear.cc and
// cuda_moe.cc.
#include "lib/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/activation/elementwise.h"
#include "kernels/common/synthetic.h"
#include "lib/backend/cuda/cuda_linear.h"
#include "lib/backend/cuda/cuda_status.h"
#include "lib/backend/cuda/cuda_util.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/common/units.h"
#include "lib/model/synthetic.h"

namespace gannet::backend {
namespace {

static_assert(static_cast<int>(model::WeightInit::kMatrix) ==
                      static_cast<int>(kernels::SyntheticInit::kMatrix) &&
                  static_cast<int>(model::WeightInit::kEmbedding) ==
                      static_cast<int>(kernels::SyntheticInit::kEmbedding) &&
                  static_cast<int>(model::WeightInit::kNorm) ==
                      static_cast<int>(kernels::SyntheticInit::kNorm) &&
                  static_cast<int>(model::WeightInit::kQkNorm) ==
                      static_cast<int>(kernels::SyntheticInit::kQkNorm) &&
                  static_cast<int>(model::WeightInit::kLayerScalar) ==
                      static_cast<int>(kernels::SyntheticInit::kLayerScalar) &&
                  static_cast<int>(model::WeightInit::kPositiveScale) ==
                      static_cast<int>(kernels::SyntheticInit::kPositiveScale) &&
                  static_cast<int>(model::WeightInit::kPermutation) ==
                      static_cast<int>(kernels::SyntheticInit::kPermutation),
              "kernels::SyntheticInit must mirror model::WeightInit");

void RegistryLog(const char* message) { GANNET_LOG_INFO("{}", message); }

// Host staging for checkpoint tensors not stored in the device type (converted on the host).
// p.data may be misaligned for its type (a checkpoint's tensor, safetensors.h): elements are
// copied out, not dereferenced.
absl::Status UploadConverted(const model::WeightView& p, DType out_type, void* dst) {
  const int64_t n = p.numel();
  std::vector<char> host(static_cast<size_t>(n) * DTypeBits(out_type) / 8);
  for (int64_t i = 0; i < n; ++i) {
    float v;
    switch (p.dtype) {
      case DType::kBF16:
        v = Bf16ToFloat(LoadUnaligned<uint16_t>(p.data, i));
        break;
      case DType::kF16:
        v = F16ToFloat(LoadUnaligned<uint16_t>(p.data, i));
        break;
      case DType::kF32:
        v = LoadUnaligned<float>(p.data, i);
        break;
      default:
        return InvalidArgumentError("LoadWeight: '{}' has unsupported dtype {}", p.name,
                                    DTypeName(p.dtype));
    }
    if (out_type == DType::kF32) {
      std::memcpy(host.data() + i * 4, &v, 4);
    } else {
      const uint16_t b = out_type == DType::kF16 ? FloatToF16(v) : FloatToBf16(v);
      std::memcpy(host.data() + i * 2, &b, 2);
    }
  }
  GANNET_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, host.data(), host.size(), cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(int device,
                                                                 std::optional<DType> compute) {
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  GANNET_RETURN_IF_ERROR(b->Init(device, compute));
  return b;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device,
                                                           std::optional<DType> compute) {
  GANNET_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::Create(device, compute));
  return std::unique_ptr<Backend>(std::move(b));
}

absl::Status CudaBackend::Init(int device, std::optional<DType> compute) {
  if (compute.has_value() && *compute != DType::kBF16 && *compute != DType::kF16) {
    return InvalidArgumentError("cuda backend: compute type {} is not one of bf16, f16",
                                DTypeName(*compute));
  }
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess || count == 0) {
    cudaGetLastError();
    // Nothing to run on (the factory may fall back). A machine without an NVIDIA driver or GPU
    // is NotFound: a CPU machine, nothing to warn about. A driver that cannot serve this build
    // (too old, broken) is Unavailable, with the versions: that one deserves a warning.
    int driver = 0;
    if (cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0) {
      return absl::NotFoundError("no NVIDIA driver is installed, so no CUDA device");
    }
    if (counted == cudaErrorNoDevice || (counted == cudaSuccess && count == 0)) {
      return absl::NotFoundError("no CUDA device (the NVIDIA driver reports none)");
    }
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaGetLastError();
    return absl::UnavailableError(fmt::format(
        "no usable CUDA device ({}; the NVIDIA driver supports CUDA {}.{}, this build needs "
        "{}.{}: update the driver)",
        cudaGetErrorString(counted), driver / 1000, driver % 1000 / 10, runtime / 1000,
        runtime % 1000 / 10));
  }
  if (device < 0 || device >= count) {
    return InvalidArgumentError("cuda backend: device {} does not exist ({} device{})", device,
                                count, count == 1 ? "" : "s");
  }
  device_id_ = device;
  GANNET_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  GANNET_CUDA_RETURN_IF_ERROR(kernels::DeviceInfo::Query(device, &device_));
  cudaDeviceProp prop;
  GANNET_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  device_name_ = fmt::format("{} (sm_{})", prop.name, device_.sm);
  if (kernels::EffectiveArch(device_.sm) == 0) {
    return UnimplementedError(
        "cuda backend: device sm_{} is older than every arch in this binary ({})", device_.sm,
        kernels::CompiledArchsString());
  }
  act_ = compute.value_or(device_.sm < 75 ? DType::kF16 : DType::kBF16);
  GANNET_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&main_stream_, cudaStreamNonBlocking));
  stream_ = main_stream_;
  kernels::SetRegistryLogSink(RegistryLog);
  GANNET_ASSIGN_OR_RETURN(linear_, CudaLinear::Create(this));
  GANNET_LOG_INFO(
      "cuda backend: device {} {} ({} SMs, {} KB shared memory per block, {}); "
      "kernels for {}; computes in {}",
      device, device_name_, device_.num_sms, device_.max_smem_optin / 1024,
      FormatBytes(TotalMemoryBytes()), kernels::CompiledArchsString(),
      act_ == DType::kF16 ? "f16 (f32 residual, norm inputs and logits)" : "bf16");
  return absl::OkStatus();
}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (cudaGraphExec_t g : graphs_) {
    if (g != nullptr) cudaGraphExecDestroy(g);
  }
  linear_.reset();
  for (Space& s : spaces_) {
    if (s.ptr != nullptr) cudaFree(s.ptr);
  }
  if (span_begin_ != nullptr) cudaEventDestroy(span_begin_);
  if (span_end_ != nullptr) cudaEventDestroy(span_end_);
  if (fork_ != nullptr) cudaEventDestroy(fork_);
  if (join_ != nullptr) cudaEventDestroy(join_);
  if (side_stream_ != nullptr) cudaStreamDestroy(side_stream_);
  if (main_stream_ != nullptr) cudaStreamDestroy(main_stream_);
}

bool CudaBackend::Capturing() const {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream_, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
}

absl::Status CudaBackend::BeginGraphCapture() {
  GANNET_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  return absl::OkStatus();
}

absl::StatusOr<int> CudaBackend::EndGraphCapture() {
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (end != cudaSuccess) {
    // An op failed (or synchronised) during capture: the capture is invalidated, nothing ran.
    cudaGetLastError();
    if (graph != nullptr) cudaGraphDestroy(graph);
    return FailedPreconditionError("cuda backend: graph capture invalidated: {}",
                                   cudaGetErrorString(end));
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  GANNET_CUDA_RETURN_IF_ERROR(inst);
  graphs_.push_back(exec);
  return static_cast<int>(graphs_.size()) - 1;
}

void CudaBackend::ReleaseGraph(int handle) {
  if (handle < 0 || handle >= static_cast<int>(graphs_.size()) || graphs_[handle] == nullptr)
    return;
  cudaStreamSynchronize(stream_);  // a launched replay may still be running
  cudaGraphExecDestroy(graphs_[handle]);
  graphs_[handle] = nullptr;
}

void CudaBackend::ReleaseGraphs() {
  cudaStreamSynchronize(stream_);  // a launched replay may still be running
  for (cudaGraphExec_t& g : graphs_) {
    if (g != nullptr) cudaGraphExecDestroy(g);
    g = nullptr;
  }
  ++graph_epoch_;  // handles given out before are stale: their slots record again
}

absl::Status CudaBackend::LaunchGraph(int handle) {
  if (handle < 0 || handle >= static_cast<int>(graphs_.size()) || graphs_[handle] == nullptr) {
    return InvalidArgumentError("cuda backend: no graph {}", handle);
  }
  GANNET_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graphs_[handle], stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::RunConcurrently(const std::function<absl::Status()>& side,
                                          const std::function<absl::Status()>& main) {
  if (stream_ != main_stream_)
    return FailedPreconditionError("RunConcurrently: already in a branch");
  if (!Capturing()) return Backend::RunConcurrently(side, main);  // eager: in order (backend.h)
  if (side_stream_ == nullptr) {
    // Created outside any capture would be cleaner, but creating a stream or an event is not a
    // stream operation and is allowed while one is captured.
    GANNET_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
    GANNET_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    GANNET_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  }
  // Fork: the side stream joins the capture after everything issued so far on the main stream.
  GANNET_CUDA_RETURN_IF_ERROR(cudaEventRecord(fork_, main_stream_));
  GANNET_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(side_stream_, fork_, 0));
  stream_ = side_stream_;
  const absl::Status side_status = side();
  stream_ = main_stream_;
  // Join even after a failure: a capture that leaves a forked stream unjoined cannot end cleanly.
  const cudaError_t rec = cudaEventRecord(join_, side_stream_);
  absl::Status status = side_status.ok() ? main() : side_status;
  const cudaError_t wait = rec == cudaSuccess ? cudaStreamWaitEvent(main_stream_, join_, 0) : rec;
  GANNET_RETURN_IF_ERROR(status);
  GANNET_CUDA_RETURN_IF_ERROR(wait);
  return absl::OkStatus();
}

absl::StatusOr<void*> CudaBackend::Workspace(WorkspaceId id, size_t bytes) {
  Space& s = spaces_[static_cast<int>(id)];
  if (bytes <= s.bytes) return s.ptr;
  if (Capturing()) {
    return FailedPreconditionError(
        "cuda backend: workspace {} needs {} bytes during stream capture (has {}); run the step "
        "once "
        "uncaptured first",
        static_cast<int>(id), bytes, s.bytes);
  }
  // Grow geometrically so a slowly growing batch does not reallocate every step.
  const size_t grown = std::max(bytes, s.bytes + s.bytes / 2);
  GANNET_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // the old space may be in use
  if (s.ptr != nullptr) GANNET_CUDA_RETURN_IF_ERROR(cudaFree(s.ptr));
  s.ptr = nullptr;
  s.bytes = 0;
  GANNET_CUDA_RETURN_IF_ERROR(cudaMalloc(&s.ptr, grown));
  ++graph_epoch_;  // recorded graphs may point at the freed space
  // Kernels that keep counters in their workspace expect them zeroed (and leave them zeroed).
  GANNET_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s.ptr, 0, grown, stream_));
  s.bytes = grown;
  return s.ptr;
}

absl::Status CudaBackend::ReserveWorkspace(WorkspaceId id, size_t bytes) {
  Space& s = spaces_[static_cast<int>(id)];
  if (bytes <= s.bytes) return absl::OkStatus();
  GANNET_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  if (s.ptr != nullptr) GANNET_CUDA_RETURN_IF_ERROR(cudaFree(s.ptr));
  s.ptr = nullptr;
  s.bytes = 0;
  GANNET_CUDA_RETURN_IF_ERROR(cudaMalloc(&s.ptr, bytes));
  ++graph_epoch_;
  GANNET_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s.ptr, 0, bytes, stream_));
  s.bytes = bytes;
  return absl::OkStatus();
}

std::string CudaBackend::DeviceName() const { return device_name_; }

absl::Status CudaBackend::BindThread() {
  GANNET_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_id_));
  return absl::OkStatus();
}

int64_t CudaBackend::TotalMemoryBytes() const {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 0;
  return static_cast<int64_t>(total);
}

absl::StatusOr<Buffer> CudaBackend::Allocate(size_t bytes) {
  void* p = nullptr;
  const size_t rounded = std::max<size_t>(256, (bytes + 255) / 256 * 256);
  const cudaError_t err = cudaMalloc(&p, rounded);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the (non-sticky) error state
    return ResourceExhaustedError(
        "cuda backend: out of memory allocating {} on device {} ({} free of {})",
        FormatBytes(static_cast<int64_t>(bytes)), device_id_, FormatBytes(FreeMemoryBytes()),
        FormatBytes(TotalMemoryBytes()));
  }
  GANNET_CUDA_RETURN_IF_ERROR(err);
  return Buffer(p, bytes, [](void* q) { cudaFree(q); });
}

absl::StatusOr<Buffer> CudaBackend::AllocateZeroed(size_t bytes) {
  GANNET_ASSIGN_OR_RETURN(Buffer b, Allocate(bytes));
  if (bytes > 0) {
    GANNET_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(b.data(), 0, bytes, stream_));
    GANNET_RETURN_IF_ERROR(Synchronize());  // outside any step: the memory is usable at once
  }
  return b;
}

absl::Status CudaBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  // From pageable memory cudaMemcpyAsync returns once `src` has been staged, so the caller may
  // reuse it; the copy is ordered with the stream's kernels.
  GANNET_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  GANNET_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  GANNET_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::Synchronize() {
  GANNET_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::BeginDeviceSpan() {
  if (span_begin_ == nullptr) {
    GANNET_CUDA_RETURN_IF_ERROR(cudaEventCreate(&span_begin_));
    GANNET_CUDA_RETURN_IF_ERROR(cudaEventCreate(&span_end_));
  }
  GANNET_CUDA_RETURN_IF_ERROR(cudaEventRecord(span_begin_, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::EndDeviceSpan() {
  if (span_end_ == nullptr) return FailedPreconditionError("EndDeviceSpan without BeginDeviceSpan");
  GANNET_CUDA_RETURN_IF_ERROR(cudaEventRecord(span_end_, stream_));
  return absl::OkStatus();
}

absl::StatusOr<double> CudaBackend::DeviceSpanSeconds() {
  if (span_end_ == nullptr) return 0.0;
  GANNET_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(span_end_));
  float ms = 0;
  GANNET_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, span_begin_, span_end_));
  return ms * 1e-3;
}

int64_t CudaBackend::FreeMemoryBytes() const {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 0;
  return static_cast<int64_t>(free_bytes);
}

absl::Status CudaBackend::Fill(Tensor t, float value) {
  // i32 is filled as 4-byte words (the f32 path's width) holding the integer.
  const bool is_int = t.dtype == DType::kI32;
  if (!is_int && !kernels::IsMatType(t.dtype)) {
    return InvalidArgumentError("cuda backend: Fill supports f32, bf16, f16 and i32, got {}",
                                DTypeName(t.dtype));
  }
  const DType type = is_int ? DType::kF32 : t.dtype;
  const int64_t n = t.rank <= 1 ? t.numel() : t.row_elems();
  const int64_t rows = t.rank <= 1 ? 1 : t.rows();
  const int64_t ld = t.rank <= 1 ? n : t.stride0();
  GANNET_RETURN_IF_ERROR(CheckInt32("Fill", {{"rows", rows}, {"row length", n}}));
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchFill(
      t.data, ld, static_cast<int>(rows), static_cast<int>(n), type, is_int, value, stream_));
  return absl::OkStatus();
}

absl::StatusOr<OwnedTensor> CudaBackend::LoadWeight(
    std::span<const model::WeightView* const> parts) {
  if (parts.empty()) return InvalidArgumentError("LoadWeight: no parts");
  const model::WeightView& first = *parts[0];
  int64_t rows = 0, total = 0;
  for (const model::WeightView* p : parts) {
    if (!p->present()) return InvalidArgumentError("LoadWeight: tensor '{}' is absent", p->name);
    if (p->format.input_perm) {
      // Kept apart from the int4 refusal below: int4 kernels still need an activation gather
      // (or a per-module permutation) for act-ordered GPTQ.
      return UnimplementedError(
          "LoadWeight: '{}' is act-ordered GPTQ int4 (desc_act: its stored inputs are "
          "permuted), which the CUDA backend does not run: use the CPU backend or a checkpoint "
          "quantized with desc_act false",
          p->name);
    }
    if (p->quantized() && p->format.elem != DType::kI4 && p->format.elem != DType::kU4) {
      return UnimplementedError(
          "LoadWeight: '{}' is quantized ({}); the CUDA backend has no kernels for this format "
          "yet (int4 only): run it on the CPU backend or load the bf16 checkpoint",
          p->name, WeightFormatName(p->format));
    }
    if (p->quantized() != first.quantized()) {
      return InvalidArgumentError(
          "LoadWeight: '{}' and '{}' cannot be concatenated: fused weights need one format",
          first.name, p->name);
    }
    if (p->shape.size() != first.shape.size() ||
        !std::equal(p->shape.begin() + 1, p->shape.end(), first.shape.begin() + 1)) {
      return InvalidArgumentError("LoadWeight: '{}' and '{}' cannot be concatenated", first.name,
                                  p->name);
    }
    if (first.quantized()) continue;  // LoadInt4Weight checks the rest
    if (!p->pieces.empty()) {
      return UnimplementedError(
          "LoadWeight: '{}' is gathered from per-expert modules ({} ...), "
          "which the CUDA backend does not load yet",
          p->name, p->pieces[0].module);
    }
    if (p->synthetic && p->dtype != DType::kBF16) {
      return InvalidArgumentError("LoadWeight: synthetic '{}' must be bf16", p->name);
    }
    rows += p->shape[0];
    total += p->numel();
  }
  if (first.quantized()) return LoadInt4Weight(parts);
  // Matrices in the compute type (what the GEMMs read: bf16, or f16 on the fp16 path), vectors
  // f32 (what the norms read).
  const bool is_vector = first.shape.size() <= 1;
  const DType out_type = is_vector ? DType::kF32 : act_;
  GANNET_ASSIGN_OR_RETURN(Buffer buf,
                          Allocate(static_cast<size_t>(total) * DTypeBits(out_type) / 8));
  char* dst = static_cast<char*>(buf.data());
  for (const model::WeightView* p : parts) {
    const size_t bytes = static_cast<size_t>(p->numel()) * DTypeBits(out_type) / 8;
    if (p->synthetic) {
      const uint64_t key = model::SyntheticKey(p->seed, p->name);
      GANNET_RETURN_IF_ERROR(RequireMatType(out_type, "weight"));
      GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchFillSynthetic(
          dst, out_type, 0, p->numel(), key,
          static_cast<kernels::SyntheticInit>(static_cast<int>(p->init)), p->shape.back(),
          stream_));
    } else if (p->dtype == out_type) {
      GANNET_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(dst, p->data, bytes, cudaMemcpyHostToDevice, stream_));
    } else {
      GANNET_RETURN_IF_ERROR(UploadConverted(*p, out_type, dst));
    }
    dst += bytes;
  }
  // Loading is outside any step; make the weight usable (and host sources releasable) now.
  GANNET_RETURN_IF_ERROR(Synchronize());
  Tensor t;
  t.data = buf.data();
  t.dtype = out_type;
  t.rank = static_cast<int>(first.shape.size());
  for (int i = 0; i < t.rank; ++i) t.shape[i] = first.shape[i];
  if (t.rank > 0) t.shape[0] = rows;
  return OwnedTensor{std::move(buf), t};
}

}  // namespace gannet::backend
