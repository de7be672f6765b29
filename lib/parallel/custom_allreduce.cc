#include "lib/parallel/custom_allreduce.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lib/common/logging.h"
#include "lib/common/status.h"

#if GANNET_HAVE_NCCL
#include <cuda_runtime.h>

#include "kernels/comm/custom_allreduce.h"
#endif

namespace gannet::parallel {

#if GANNET_HAVE_NCCL

namespace {

// Messages the custom kernels take by default: the push kernel's (up to 1 MB), one one-way NVLink
// write a call; that covers every decode all-reduce of 31B up to batch 97 (bf16 [batch, 5376]).
// On two H200s (gannet-allreduce-bench, docs/results-log/multigpu.md, session 19) it takes 3.5-6.2
// us from 1 to 256 KB where NCCL takes 7.1-12.5, and at 1 MB the two are even (12.8-15.9 against
// 14.3-14.4 us). GANNET_ALLREDUCE=nccl or =custom pins either path.
constexpr size_t kDefaultMaxBytes = kernels::kCustomAllReducePushMaxBytes;

absl::Status Cuda(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return InternalError("custom all-reduce: {}: {}", what, cudaGetErrorString(e));
}

// The largest message GANNET_ALLREDUCE asks the custom kernel to take (0: none, NCCL only).
absl::StatusOr<size_t> RequestedMaxBytes(int world) {
  const char* env = std::getenv("GANNET_ALLREDUCE");
  const std::string mode = env != nullptr ? env : "auto";
  if (mode != "auto" && mode != "nccl" && mode != "custom") {
    return InvalidArgumentError("GANNET_ALLREDUCE is '{}'; it must be auto, nccl or custom", mode);
  }
  if (mode == "nccl" || world < 2 || world > kernels::kCustomAllReduceMaxRanks) return 0;
  return mode == "custom" ? kernels::kCustomAllReduceMaxBytes : kDefaultMaxBytes;
}

// A zeroed workspace on the current device (finished zeroing when this returns).
absl::StatusOr<void*> NewWorkspace() {
  void* ws = nullptr;
  const size_t bytes = kernels::CustomAllReduceWorkspaceBytes();
  GANNET_RETURN_IF_ERROR(Cuda(cudaMalloc(&ws, bytes), "allocating the workspace"));
  absl::Status st = Cuda(cudaMemset(ws, 0, bytes), "zeroing the workspace");
  if (st.ok()) st = Cuda(cudaDeviceSynchronize(), "zeroing the workspace");
  if (!st.ok()) {
    cudaFree(ws);
    return st;
  }
  return ws;
}

}  // namespace

absl::Status CustomAllReduce::AllocateAbortFlag() {
  GANNET_RETURN_IF_ERROR(Cuda(cudaHostAlloc(reinterpret_cast<void**>(&abort_), sizeof(int),
                                            cudaHostAllocMapped | cudaHostAllocPortable),
                              "allocating the abort flag"));
  *abort_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<CustomAllReduce>> CustomAllReduce::Create(
    const std::vector<int>& devices) {
  const int world = static_cast<int>(devices.size());
  GANNET_ASSIGN_OR_RETURN(const size_t max_bytes, RequestedMaxBytes(world));
  if (max_bytes == 0) return nullptr;
  for (int a : devices) {
    for (int b : devices) {
      int ok = 0;
      if (a != b && (cudaDeviceCanAccessPeer(&ok, a, b) != cudaSuccess || !ok)) {
        GANNET_LOG_INFO("tensor parallel: no peer access from device {} to {}: all-reduce by NCCL",
                        a, b);
        return nullptr;
      }
    }
  }
  std::shared_ptr<CustomAllReduce> c(new CustomAllReduce());
  c->devices_ = devices;
  c->max_bytes_ = max_bytes;
  GANNET_RETURN_IF_ERROR(c->AllocateAbortFlag());
  for (int d : devices) {
    GANNET_RETURN_IF_ERROR(Cuda(cudaSetDevice(d), "selecting the device"));
    for (int peer : devices) {
      if (peer == d) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
      } else {
        GANNET_RETURN_IF_ERROR(Cuda(e, "enabling peer access"));
      }
    }
    GANNET_ASSIGN_OR_RETURN(void* ws, NewWorkspace());
    c->workspaces_.push_back(ws);
    c->imported_.push_back(false);
  }
  return c;
}

absl::StatusOr<std::shared_ptr<CustomAllReduce>> CustomAllReduce::CreateAcrossProcesses(
    int rank, int world, int device, const RankExchange& exchange) {
  // Every step below is taken by every rank, whatever happened before it, so the exchanges stay
  // matched; a rank that cannot take part says so with a zero limit in the final agreement.
  absl::StatusOr<size_t> requested = RequestedMaxBytes(world);
  size_t want = requested.ok() ? *requested : 0;
  std::shared_ptr<CustomAllReduce> c(new CustomAllReduce());
  c->devices_ = {device};
  c->workspaces_.assign(world, nullptr);
  c->imported_.assign(world, false);
  cudaIpcMemHandle_t handle{};
  if (want > 0) {
    absl::Status st = c->AllocateAbortFlag();
    absl::StatusOr<void*> ws = st.ok() ? NewWorkspace() : absl::StatusOr<void*>(st);
    if (ws.ok()) {
      c->workspaces_[rank] = *ws;
      st = Cuda(cudaIpcGetMemHandle(&handle, *ws), "exporting the workspace");
    } else {
      st = ws.status();
    }
    if (!st.ok()) {
      GANNET_LOG_INFO("tensor parallel rank {}: {}; all-reduce by NCCL", rank, st.message());
      want = 0;
    }
  }
  GANNET_ASSIGN_OR_RETURN(
      std::vector<std::string> handles,
      exchange.all_gather(std::string(reinterpret_cast<const char*>(&handle), sizeof handle)));
  if (handles.size() != static_cast<size_t>(world)) {
    return InternalError("custom all-reduce: {} handles from a group of {}", handles.size(), world);
  }
  for (int p = 0; p < world && want > 0; ++p) {
    if (p == rank) continue;
    cudaIpcMemHandle_t h;
    if (handles[p].size() != sizeof h) {
      want = 0;
      break;
    }
    std::memcpy(&h, handles[p].data(), sizeof h);
    void* peer = nullptr;
    const cudaError_t e = cudaIpcOpenMemHandle(&peer, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      GANNET_LOG_INFO(
          "tensor parallel rank {}: cannot map rank {}'s workspace ({}); all-reduce "
          "by NCCL",
          rank, p, cudaGetErrorString(e));
      want = 0;
      break;
    }
    c->workspaces_[p] = peer;
    c->imported_[p] = true;
  }
  GANNET_ASSIGN_OR_RETURN(const int64_t agreed,
                          exchange.min_over_ranks(static_cast<int64_t>(want)));
  GANNET_RETURN_IF_ERROR(requested.status());
  if (agreed <= 0) return nullptr;  // the destructor closes and frees what was set up
  c->max_bytes_ = static_cast<size_t>(agreed);
  return c;
}

CustomAllReduce::~CustomAllReduce() {
  for (size_t r = 0; r < workspaces_.size(); ++r) {
    if (workspaces_[r] == nullptr) continue;
    if (cudaSetDevice(devices_[std::min(r, devices_.size() - 1)]) != cudaSuccess) continue;
    if (imported_[r]) {
      cudaIpcCloseMemHandle(workspaces_[r]);
    } else {
      cudaFree(workspaces_[r]);
    }
  }
  if (abort_ != nullptr) cudaFreeHost(abort_);
}

void CustomAllReduce::Abort() {
  if (abort_ != nullptr) reinterpret_cast<volatile int*>(abort_)[0] = 1;
}

bool CustomAllReduce::Takes(const backend::Tensor& x) const {
  return x.contiguous() && (x.dtype == DType::kF32 || x.dtype == DType::kBF16) &&
         static_cast<size_t>(x.numel()) * x.elem_bytes() <= max_bytes_;
}

absl::Status CustomAllReduce::Run(int rank, backend::Tensor x, void* stream) const {
  return Cuda(
      kernels::LaunchCustomAllReduce(
          x.data, x.numel(),
          x.dtype == DType::kF32 ? kernels::AllReduceType::kF32 : kernels::AllReduceType::kBF16,
          rank, static_cast<int>(workspaces_.size()), workspaces_.data(), abort_,
          static_cast<cudaStream_t>(stream)),
      "launch");
}

bool CustomAllReduce::TakesPostNormResidual(const backend::Tensor& x,
                                            const backend::Tensor& residual,
                                            const backend::Tensor& next_out) const {
  return Takes(x) && x.dtype == DType::kBF16 &&
         kernels::CustomAllReduceFuses(x.data, x.rows(), x.row_elems()) &&
         residual.dtype == DType::kF32 && (!next_out.valid() || next_out.dtype == DType::kBF16);
}

absl::Status CustomAllReduce::RunPostNormResidual(int rank, backend::Tensor x,
                                                  backend::Tensor post_weight,
                                                  backend::Tensor residual, backend::Tensor scalar,
                                                  backend::Tensor next_weight,
                                                  backend::Tensor next_out, float eps,
                                                  void* stream) const {
  const int64_t rows = x.rows(), n = x.row_elems();
  auto f32 = [](const backend::Tensor& t, int64_t numel) {
    return !t.valid() || (t.dtype == DType::kF32 && t.contiguous() && t.numel() == numel);
  };
  if (!TakesPostNormResidual(x, residual, next_out) || !post_weight.valid() ||
      !f32(post_weight, n) || !f32(scalar, 1) || !f32(next_weight, n) || residual.rows() != rows ||
      residual.row_elems() != n ||
      (next_out.valid() && (next_out.rows() != rows || next_out.row_elems() != n))) {
    return InvalidArgumentError(
        "custom all-reduce with PostNormResidual: x {} [{}, {}], residual {} [{}, {}] and the "
        "weights do not fit the fused kernel",
        DTypeName(x.dtype), rows, n, DTypeName(residual.dtype), residual.rows(),
        residual.row_elems());
  }
  kernels::PostNormResidualArgs a;
  a.x = x.data;
  a.rows = rows;
  a.n = n;
  a.post_weight = post_weight.as<float>();
  a.residual = residual.as<float>();
  a.residual_ld = residual.stride0();
  a.scalar = scalar.valid() ? scalar.as<float>() : nullptr;
  a.next_weight = next_weight.valid() ? next_weight.as<float>() : nullptr;
  a.next_out = next_out.valid() ? next_out.data : nullptr;
  a.next_out_ld = next_out.valid() ? next_out.stride0() : 0;
  a.eps = eps;
  return Cuda(kernels::LaunchCustomAllReducePostNormResidual(
                  a, rank, static_cast<int>(workspaces_.size()), workspaces_.data(), abort_,
                  static_cast<cudaStream_t>(stream)),
              "launch (with PostNormResidual)");
}

#else

absl::StatusOr<std::shared_ptr<CustomAllReduce>> CustomAllReduce::Create(const std::vector<int>&) {
  return nullptr;
}
absl::StatusOr<std::shared_ptr<CustomAllReduce>> CustomAllReduce::CreateAcrossProcesses(
    int, int, int, const RankExchange&) {
  return nullptr;
}
CustomAllReduce::~CustomAllReduce() = default;
bool CustomAllReduce::Takes(const backend::Tensor&) const { return false; }
void CustomAllReduce::Abort() {}
absl::Status CustomAllReduce::Run(int, backend::Tensor, void*) const {
  return absl::UnimplementedError("custom all-reduce: this build has no CUDA");
}
bool CustomAllReduce::TakesPostNormResidual(const backend::Tensor&, const backend::Tensor&,
                                            const backend::Tensor&) const {
  return false;
}
absl::Status CustomAllReduce::RunPostNormResidual(int, backend::Tensor, backend::Tensor,
                                                  backend::Tensor, backend::Tensor, backend::Tensor,
                                                  backend::Tensor, float, void*) const {
  return absl::UnimplementedError("custom all-reduce: this build has no CUDA");
}

#endif

}  // namespace gannet::parallel
