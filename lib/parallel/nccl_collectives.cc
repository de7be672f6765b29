#include "lib/parallel/nccl_collectives.h"

#include <atomic>
#include <cstdlib>

#include "lib/common/status.h"

#if GANNET_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include "lib/backend/cuda/cuda_backend.h"
#include "lib/parallel/custom_allreduce.h"
#endif

namespace gannet::parallel {

#if GANNET_HAVE_NCCL

namespace {

absl::Status NcclError(ncclResult_t r, std::string_view what) {
  absl::Status st = InternalError("NCCL {}: {} ({})", what, ncclGetErrorString(r),
                                  ncclGetLastError(nullptr));
  // A peer that vanished or an aborted communicator leaves the group unusable.
  if (r == ncclRemoteError || r == ncclSystemError || r == ncclInternalError) {
    return MarkDeviceLost(st);
  }
  return st;
}

#define GANNET_NCCL_RETURN_IF_ERROR(expr, what)               \
  do {                                                        \
    const ncclResult_t gannet_nccl_r = (expr);                \
    if (gannet_nccl_r != ncclSuccess) return NcclError(gannet_nccl_r, what); \
  } while (0)

absl::StatusOr<ncclDataType_t> NcclType(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kBF16: return ncclBfloat16;
    case DType::kF16: return ncclFloat16;
    default: return InvalidArgumentError("NCCL: no reduction for {} tensors", DTypeName(t));
  }
}

class NcclCollectives : public backend::Collectives {
 public:
  NcclCollectives(ncclComm_t comm, backend::CudaBackend* be, int rank, int world,
                  std::shared_ptr<CustomAllReduce> custom)
      : comm_(comm), be_(be), rank_(rank), world_(world), custom_(std::move(custom)) {}
  ~NcclCollectives() override {
    if (!aborted_) ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  void Abort() override {
    // ncclCommAbort ends kernels waiting for a peer; it is called once, on destruction or here.
    if (!aborted_.exchange(true)) {
      if (custom_ != nullptr) custom_->Abort();
      ncclCommAbort(comm_);
    }
  }

  absl::Status AllReduceSum(backend::Tensor x) override {
    GANNET_RETURN_IF_ERROR(Usable());
    if (!x.contiguous()) return InvalidArgumentError("NCCL all-reduce of a strided tensor");
    // Small messages (decode steps) by the one-shot kernel over peer memory, the rest by NCCL.
    if (custom_ != nullptr && custom_->Takes(x)) return custom_->Run(rank_, x, be_->stream());
    GANNET_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(x.dtype));
    GANNET_NCCL_RETURN_IF_ERROR(ncclAllReduce(x.data, x.data, static_cast<size_t>(x.numel()), type,
                                              ncclSum, comm_, be_->stream()),
                                "all-reduce");
    return absl::OkStatus();
  }

  absl::Status AllGatherColumns(backend::Tensor blocks, backend::Tensor full) override {
    GANNET_RETURN_IF_ERROR(Usable());
    const int64_t rows = full.rows(), cols = full.row_elems() / world_;
    if (blocks.dtype != DType::kF32 || full.dtype != DType::kF32 || !blocks.contiguous() ||
        blocks.numel() != rows * cols * world_ || full.row_elems() != cols * world_) {
      return InvalidArgumentError("NCCL gather of {} f32 block elements into [{}, {}]",
                                  blocks.numel(), rows, full.row_elems());
    }
    const size_t block = static_cast<size_t>(rows * cols);
    float* base = blocks.as<float>();
    GANNET_NCCL_RETURN_IF_ERROR(
        ncclAllGather(base + rank_ * block, base, block, ncclFloat32, comm_, be_->stream()),
        "all-gather");
    for (int r = 0; r < world_; ++r) {
      const cudaError_t e = cudaMemcpy2DAsync(
          full.as<float>() + r * cols, full.stride0() * sizeof(float), base + r * block,
          cols * sizeof(float), cols * sizeof(float), rows, cudaMemcpyDeviceToDevice,
          be_->stream());
      if (e != cudaSuccess) {
        return InternalError("NCCL gather: copying rank {}'s block: {}", r, cudaGetErrorString(e));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Usable() const {
    if (aborted_) {
      return MarkDeviceLost(absl::AbortedError("tensor parallel: the NCCL group was aborted"));
    }
    return absl::OkStatus();
  }
  ncclComm_t comm_;
  backend::CudaBackend* be_;
  const int rank_, world_;
  std::shared_ptr<CustomAllReduce> custom_;  // shared by the group's ranks; null = NCCL only
  std::atomic<bool> aborted_{false};
};

}  // namespace

bool NcclCompiled() { return true; }

absl::StatusOr<std::vector<std::unique_ptr<backend::Collectives>>> CreateNcclGroup(
    const std::vector<backend::Backend*>& backends) {
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);  // never NVLink multicast (kept if set)
  const int world = static_cast<int>(backends.size());
  std::vector<backend::CudaBackend*> cuda(world);
  std::vector<int> devices(world);
  for (int r = 0; r < world; ++r) {
    cuda[r] = dynamic_cast<backend::CudaBackend*>(backends[r]);
    if (cuda[r] == nullptr) {
      return InvalidArgumentError("tensor parallel over NCCL: rank {}'s backend is {}, not CUDA", r,
                                  backends[r]->name());
    }
    devices[r] = cuda[r]->device_id();
    for (int q = 0; q < r; ++q) {
      if (devices[q] == devices[r]) {
        return InvalidArgumentError("tensor parallel: device {} is listed twice", devices[r]);
      }
    }
  }
  std::vector<ncclComm_t> comms(world);
  GANNET_NCCL_RETURN_IF_ERROR(ncclCommInitAll(comms.data(), world, devices.data()),
                              "creating the communicators");
  GANNET_ASSIGN_OR_RETURN(std::shared_ptr<CustomAllReduce> custom, CustomAllReduce::Create(devices));
  std::vector<std::unique_ptr<backend::Collectives>> out;
  for (int r = 0; r < world; ++r) {
    out.push_back(std::make_unique<NcclCollectives>(comms[r], cuda[r], r, world, custom));
  }
  return out;
}

#else  // !GANNET_HAVE_NCCL

bool NcclCompiled() { return false; }

absl::StatusOr<std::vector<std::unique_ptr<backend::Collectives>>> CreateNcclGroup(
    const std::vector<backend::Backend*>&) {
  return absl::UnimplementedError("tensor parallelism on CUDA needs NCCL, which this build lacks");
}

#endif

}  // namespace gannet::parallel
