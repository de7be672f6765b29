#include "lib/parallel/custom_allreduce.h"

#include <cstdlib>
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

// Messages the custom kernel takes by default: up to 128 KB, where every thread of its grid
// (36 blocks x 256 threads x 16 bytes = 144 KB) moves at most one chunk, so a call costs one
// remote round trip plus the flag barrier, the structure the first kernel had at 1 KB, where it
// beat NCCL on two H200s (7.4 vs 9.6 us; RESULTS.md, session 5). That covers decode steps of 31B
// up to batch 12 (bf16 [batch, 5376]); beyond, NCCL's bandwidth-optimal algorithms are expected
// to win on NVLink. The limit is an estimate until the two-GPU run measures the rewritten kernel
// (gannet-allreduce-bench prints both); GANNET_ALLREDUCE=nccl or =custom pins either path.
constexpr size_t kDefaultMaxBytes = size_t{128} << 10;

absl::Status Cuda(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return InternalError("custom all-reduce: {}: {}", what, cudaGetErrorString(e));
}

}  // namespace

absl::StatusOr<std::shared_ptr<CustomAllReduce>> CustomAllReduce::Create(
    const std::vector<int>& devices) {
  const char* env = std::getenv("GANNET_ALLREDUCE");
  const std::string mode = env != nullptr ? env : "auto";
  if (mode != "auto" && mode != "nccl" && mode != "custom") {
    return InvalidArgumentError("GANNET_ALLREDUCE is '{}'; it must be auto, nccl or custom", mode);
  }
  const int world = static_cast<int>(devices.size());
  if (mode == "nccl" || world < 2 || world > kernels::kCustomAllReduceMaxRanks) return nullptr;
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
  c->max_bytes_ = mode == "custom" ? kernels::kCustomAllReduceMaxBytes : kDefaultMaxBytes;
  const size_t bytes = kernels::CustomAllReduceWorkspaceBytes();
  GANNET_RETURN_IF_ERROR(Cuda(cudaHostAlloc(reinterpret_cast<void**>(&c->abort_), sizeof(int),
                                            cudaHostAllocMapped | cudaHostAllocPortable),
                              "allocating the abort flag"));
  *c->abort_ = 0;
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
    void* ws = nullptr;
    GANNET_RETURN_IF_ERROR(Cuda(cudaMalloc(&ws, bytes), "allocating the workspace"));
    c->workspaces_.push_back(ws);
    GANNET_RETURN_IF_ERROR(Cuda(cudaMemset(ws, 0, bytes), "zeroing the workspace"));
  }
  GANNET_RETURN_IF_ERROR(Cuda(cudaDeviceSynchronize(), "zeroing the workspace"));
  return c;
}

CustomAllReduce::~CustomAllReduce() {
  for (size_t r = 0; r < workspaces_.size(); ++r) {
    if (cudaSetDevice(devices_[r]) == cudaSuccess) cudaFree(workspaces_[r]);
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
  return Cuda(kernels::LaunchCustomAllReduce(
                  x.data, x.numel(),
                  x.dtype == DType::kF32 ? kernels::AllReduceType::kF32
                                         : kernels::AllReduceType::kBF16,
                  rank, static_cast<int>(workspaces_.size()), workspaces_.data(), abort_,
                  static_cast<cudaStream_t>(stream)),
              "launch");
}

#else

absl::StatusOr<std::shared_ptr<CustomAllReduce>> CustomAllReduce::Create(const std::vector<int>&) {
  return nullptr;
}
CustomAllReduce::~CustomAllReduce() = default;
bool CustomAllReduce::Takes(const backend::Tensor&) const { return false; }
void CustomAllReduce::Abort() {}
absl::Status CustomAllReduce::Run(int, backend::Tensor, void*) const {
  return absl::UnimplementedError("custom all-reduce: this build has no CUDA");
}

#endif

}  // namespace gannet::parallel
