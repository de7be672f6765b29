#include "lib/parallel/nccl_collectives.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>

#include "lib/common/logging.h"
#include "lib/common/mutex.h"
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
  absl::Status st =
      InternalError("NCCL {}: {} ({})", what, ncclGetErrorString(r), ncclGetLastError(nullptr));
  // A peer that vanished or an aborted communicator leaves the group unusable.
  if (r == ncclRemoteError || r == ncclSystemError || r == ncclInternalError) {
    return MarkDeviceLost(st);
  }
  return st;
}

#define GANNET_NCCL_RETURN_IF_ERROR(expr, what)                              \
  do {                                                                       \
    const ncclResult_t gannet_nccl_r = (expr);                               \
    if (gannet_nccl_r != ncclSuccess) return NcclError(gannet_nccl_r, what); \
  } while (0)

absl::Status CudaError(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return InternalError("tensor parallel: {}: {}", what, cudaGetErrorString(e));
}

absl::StatusOr<ncclDataType_t> NcclType(DType t) {
  switch (t) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    default:
      return InvalidArgumentError("NCCL: no reduction for {} tensors", DTypeName(t));
  }
}

// One rank's communicator, shared by its collectives and its channel: an abort from either (or
// from another thread) ends every wait on it.
struct Comm {
  ncclComm_t comm = nullptr;
  backend::CudaBackend* be = nullptr;
  int rank = 0, world = 1;
  std::shared_ptr<CustomAllReduce> custom;  // null = NCCL only
  std::atomic<bool> aborted{false};
  cudaEvent_t done = nullptr;  // host waits with a deadline
  void* dev = nullptr;         // device staging: header and payload
  size_t dev_bytes = 0;
  void* host = nullptr;  // pinned staging
  size_t host_bytes = 0;

  // ncclCommAbort first sets the flags that end the device's waits (its kernels quit), then, in
  // commDestroySync, waits until no CUDA graph holding this communicator's operations exists. The
  // ranks' recorded steps hold them until teardown releases them (Backend::ReleaseGraphs), so an
  // abort called mid-run, by a deadline, would block its caller forever (the killed-rank test of
  // session 16 did). It runs on its own thread; the destructor, which comes after the graphs are
  // released, waits for it a bounded time.
  std::thread aborter;
  std::future<void> abort_finished;

  ~Comm() {
    if (!aborted) ncclCommDestroy(comm);
    if (aborter.joinable()) {
      if (abort_finished.wait_for(std::chrono::seconds(30)) == std::future_status::ready) {
        aborter.join();
      } else {
        GANNET_LOG_WARNING(
            "tensor parallel: rank {}'s NCCL abort has not finished after 30 s (a "
            "recorded graph still holds the communicator); leaving it",
            rank);
        aborter.detach();
      }
    }
    if (done != nullptr) cudaEventDestroy(done);
    if (dev != nullptr) cudaFree(dev);
    if (host != nullptr) cudaFreeHost(host);
  }
  void Abort() {
    if (!aborted.exchange(true)) {
      if (custom != nullptr) custom->Abort();
      std::packaged_task<void()> task([c = comm] { ncclCommAbort(c); });
      abort_finished = task.get_future();
      aborter = std::thread(std::move(task));
    }
  }
  absl::Status Usable() const {
    if (aborted)
      return MarkDeviceLost(absl::AbortedError("tensor parallel: the NCCL group was aborted"));
    return absl::OkStatus();
  }
  absl::Status Reserve(size_t bytes) {
    if (bytes > dev_bytes) {
      if (dev != nullptr) cudaFree(dev);
      dev = nullptr;
      dev_bytes = 0;
      GANNET_RETURN_IF_ERROR(CudaError(cudaMalloc(&dev, bytes), "staging buffer"));
      dev_bytes = bytes;
    }
    if (bytes > host_bytes) {
      if (host != nullptr) cudaFreeHost(host);
      host = nullptr;
      host_bytes = 0;
      GANNET_RETURN_IF_ERROR(CudaError(cudaMallocHost(&host, bytes), "pinned staging buffer"));
      host_bytes = bytes;
    }
    return absl::OkStatus();
  }
  // Waits for the work issued so far on the rank's stream, at most `timeout_s`; past it the group
  // is presumed to have lost a rank and is aborted (device lost).
  absl::Status Wait(double timeout_s, std::string_view what) {
    if (done == nullptr) {
      GANNET_RETURN_IF_ERROR(
          CudaError(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event"));
    }
    GANNET_RETURN_IF_ERROR(CudaError(cudaEventRecord(done, be->stream()), "event"));
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (int spins = 0;; ++spins) {
      const cudaError_t e = cudaEventQuery(done);
      if (e == cudaSuccess) return Usable();
      if (e != cudaErrorNotReady) return MarkDeviceLost(CudaError(e, what));
      if (aborted) return Usable();
      if (std::chrono::steady_clock::now() > deadline) {
        Abort();
        return MarkDeviceLost(absl::DeadlineExceededError(fmt::format(
            "tensor parallel: {} did not complete within {} s (a rank of the group is gone)", what,
            timeout_s)));
      }
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
};

// Every rank's `mine` (the same size on every rank), in rank order; waits with the group deadline.
absl::StatusOr<std::vector<std::string>> AllGatherBytes(Comm& c, const std::string& mine) {
  GANNET_RETURN_IF_ERROR(c.Usable());
  const size_t n = mine.size();
  GANNET_RETURN_IF_ERROR(c.Reserve(n * c.world));
  cudaStream_t s = c.be->stream();
  auto* dev = static_cast<uint8_t*>(c.dev);
  std::memcpy(c.host, mine.data(), n);
  GANNET_RETURN_IF_ERROR(
      CudaError(cudaMemcpyAsync(dev + c.rank * n, c.host, n, cudaMemcpyHostToDevice, s), "copy"));
  GANNET_NCCL_RETURN_IF_ERROR(ncclAllGather(dev + c.rank * n, dev, n, ncclUint8, c.comm, s),
                              "all-gather");
  GANNET_RETURN_IF_ERROR(
      CudaError(cudaMemcpyAsync(c.host, dev, n * c.world, cudaMemcpyDeviceToHost, s), "copy"));
  GANNET_RETURN_IF_ERROR(c.Wait(GroupTimeoutSeconds(), "exchanging the all-reduce workspaces"));
  std::vector<std::string> all(c.world);
  for (int r = 0; r < c.world; ++r) all[r].assign(static_cast<const char*>(c.host) + r * n, n);
  return all;
}

class NcclCollectives : public backend::Collectives {
 public:
  explicit NcclCollectives(std::shared_ptr<Comm> c) : c_(std::move(c)) {}
  int rank() const override { return c_->rank; }
  int world_size() const override { return c_->world; }
  void Abort() override { c_->Abort(); }

  absl::Status AllReduceSum(backend::Tensor x) override {
    GANNET_RETURN_IF_ERROR(c_->Usable());
    if (!x.contiguous()) return InvalidArgumentError("NCCL all-reduce of a strided tensor");
    // Small messages (decode steps) by the one-shot kernel over peer memory, the rest by NCCL.
    if (c_->custom != nullptr && c_->custom->Takes(x)) {
      return c_->custom->Run(c_->rank, x, c_->be->stream());
    }
    GANNET_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(x.dtype));
    GANNET_NCCL_RETURN_IF_ERROR(ncclAllReduce(x.data, x.data, static_cast<size_t>(x.numel()), type,
                                              ncclSum, c_->comm, c_->be->stream()),
                                "all-reduce");
    return absl::OkStatus();
  }

  absl::Status AllReducePostNormResidual(backend::Backend& be, backend::Tensor x,
                                         backend::Tensor post_weight, backend::Tensor residual,
                                         backend::Tensor scalar, backend::Tensor next_weight,
                                         backend::Tensor next_out, float eps) override {
    // Decode rows: the push all-reduce computes the update itself (one kernel, not two).
    if (c_->custom != nullptr && c_->custom->TakesPostNormResidual(x, residual, next_out)) {
      GANNET_RETURN_IF_ERROR(c_->Usable());
      return c_->custom->RunPostNormResidual(c_->rank, x, post_weight, residual, scalar,
                                             next_weight, next_out, eps, c_->be->stream());
    }
    return Collectives::AllReducePostNormResidual(be, x, post_weight, residual, scalar, next_weight,
                                                  next_out, eps);
  }

  absl::Status AllGatherColumns(backend::Tensor blocks, backend::Tensor full) override {
    GANNET_RETURN_IF_ERROR(c_->Usable());
    const int world = c_->world;
    const int64_t rows = full.rows(), cols = full.row_elems() / world;
    if (blocks.dtype != DType::kF32 || full.dtype != DType::kF32 || !blocks.contiguous() ||
        blocks.numel() != rows * cols * world || full.row_elems() != cols * world) {
      return InvalidArgumentError("NCCL gather of {} f32 block elements into [{}, {}]",
                                  blocks.numel(), rows, full.row_elems());
    }
    const size_t block = static_cast<size_t>(rows * cols);
    float* base = blocks.as<float>();
    GANNET_NCCL_RETURN_IF_ERROR(ncclAllGather(base + c_->rank * block, base, block, ncclFloat32,
                                              c_->comm, c_->be->stream()),
                                "all-gather");
    for (int r = 0; r < world; ++r) {
      GANNET_RETURN_IF_ERROR(
          CudaError(cudaMemcpy2DAsync(full.as<float>() + r * cols, full.stride0() * sizeof(float),
                                      base + r * block, cols * sizeof(float), cols * sizeof(float),
                                      rows, cudaMemcpyDeviceToDevice, c_->be->stream()),
                    "gathering a rank's logits block"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> MinOverRanks(int64_t v) override {
    GANNET_RETURN_IF_ERROR(c_->Usable());
    GANNET_RETURN_IF_ERROR(c_->Reserve(sizeof(int64_t)));
    std::memcpy(c_->host, &v, sizeof v);
    cudaStream_t s = c_->be->stream();
    GANNET_RETURN_IF_ERROR(
        CudaError(cudaMemcpyAsync(c_->dev, c_->host, sizeof v, cudaMemcpyHostToDevice, s), "copy"));
    GANNET_NCCL_RETURN_IF_ERROR(ncclAllReduce(c_->dev, c_->dev, 1, ncclInt64, ncclMin, c_->comm, s),
                                "min over ranks");
    GANNET_RETURN_IF_ERROR(
        CudaError(cudaMemcpyAsync(c_->host, c_->dev, sizeof v, cudaMemcpyDeviceToHost, s), "copy"));
    GANNET_RETURN_IF_ERROR(c_->Wait(GroupTimeoutSeconds(), "the min over ranks"));
    std::memcpy(&v, c_->host, sizeof v);
    return v;
  }

 private:
  std::shared_ptr<Comm> c_;
};

// Rank 0 broadcasts [size][bytes]; the others receive into pinned memory. Every hand-off waits
// with the group's deadline, so a rank that died shows as device lost, never a hang.
class NcclChannel : public StepChannel {
 public:
  explicit NcclChannel(std::shared_ptr<Comm> c) : c_(std::move(c)) {}

  absl::Status Send(std::span<const uint8_t> msg) override {
    GANNET_RETURN_IF_ERROR(c_->Usable());
    const int64_t n = static_cast<int64_t>(msg.size());
    GANNET_RETURN_IF_ERROR(c_->Reserve(sizeof(int64_t) + msg.size()));
    std::memcpy(c_->host, &n, sizeof n);
    if (n > 0) std::memcpy(static_cast<uint8_t*>(c_->host) + sizeof n, msg.data(), n);
    GANNET_RETURN_IF_ERROR(Broadcast(sizeof n + n, /*to_host=*/false));
    return c_->Wait(GroupTimeoutSeconds(), "sending a step to the group");
  }

  absl::StatusOr<std::vector<uint8_t>> Receive(double timeout_s) override {
    GANNET_RETURN_IF_ERROR(c_->Usable());
    GANNET_RETURN_IF_ERROR(c_->Reserve(sizeof(int64_t)));
    GANNET_RETURN_IF_ERROR(Broadcast(sizeof(int64_t), /*to_host=*/true));
    GANNET_RETURN_IF_ERROR(c_->Wait(timeout_s, "waiting for rank 0's next message"));
    int64_t n = 0;
    std::memcpy(&n, c_->host, sizeof n);
    if (n < 0 || n > (int64_t{1} << 34)) {
      c_->Abort();
      return MarkDeviceLost(InternalError("tensor parallel: a message of {} bytes", n));
    }
    GANNET_RETURN_IF_ERROR(c_->Reserve(sizeof(int64_t) + n));
    if (n > 0) {
      GANNET_RETURN_IF_ERROR(BroadcastPayload(n, /*to_host=*/true));
      GANNET_RETURN_IF_ERROR(c_->Wait(GroupTimeoutSeconds(), "receiving a step message"));
    }
    const auto* p = static_cast<const uint8_t*>(c_->host) + (n > 0 ? sizeof(int64_t) : 0);
    return std::vector<uint8_t>(p, p + n);
  }

 private:
  // Rank 0 sends the size then the payload as two broadcasts (the receivers learn the size
  // first); the payload rides at offset 8 of the staging buffers.
  absl::Status Broadcast(size_t bytes, bool to_host) {
    cudaStream_t s = c_->be->stream();
    if (!to_host) {
      GANNET_RETURN_IF_ERROR(
          CudaError(cudaMemcpyAsync(c_->dev, c_->host, bytes, cudaMemcpyHostToDevice, s), "copy"));
      GANNET_NCCL_RETURN_IF_ERROR(
          ncclBroadcast(c_->dev, c_->dev, sizeof(int64_t), ncclUint8, 0, c_->comm, s), "broadcast");
      if (bytes > sizeof(int64_t)) return BroadcastPayload(bytes - sizeof(int64_t), false);
      return absl::OkStatus();
    }
    GANNET_NCCL_RETURN_IF_ERROR(ncclBroadcast(c_->dev, c_->dev, bytes, ncclUint8, 0, c_->comm, s),
                                "broadcast");
    return CudaError(cudaMemcpyAsync(c_->host, c_->dev, bytes, cudaMemcpyDeviceToHost, s), "copy");
  }
  absl::Status BroadcastPayload(int64_t n, bool to_host) {
    cudaStream_t s = c_->be->stream();
    uint8_t* dev = static_cast<uint8_t*>(c_->dev) + sizeof(int64_t);
    GANNET_NCCL_RETURN_IF_ERROR(ncclBroadcast(dev, dev, n, ncclUint8, 0, c_->comm, s), "broadcast");
    if (!to_host) return absl::OkStatus();
    return CudaError(cudaMemcpyAsync(static_cast<uint8_t*>(c_->host) + sizeof(int64_t), dev, n,
                                     cudaMemcpyDeviceToHost, s),
                     "copy");
  }

  std::shared_ptr<Comm> c_;
};

void NoNvls() { setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); }

}  // namespace

bool NcclCompiled() { return true; }

absl::StatusOr<std::vector<std::unique_ptr<backend::Collectives>>> CreateNcclGroup(
    const std::vector<backend::Backend*>& backends) {
  NoNvls();
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
  GANNET_ASSIGN_OR_RETURN(std::shared_ptr<CustomAllReduce> custom,
                          CustomAllReduce::Create(devices));
  std::vector<std::unique_ptr<backend::Collectives>> out;
  for (int r = 0; r < world; ++r) {
    auto c = std::make_shared<Comm>();
    c->comm = comms[r];
    c->be = cuda[r];
    c->rank = r;
    c->world = world;
    c->custom = custom;
    out.push_back(std::make_unique<NcclCollectives>(std::move(c)));
  }
  return out;
}

absl::StatusOr<std::string> CreateNcclId() {
  NoNvls();
  static_assert(sizeof(ncclUniqueId) == kTpIdBytes);
  ncclUniqueId id;
  GANNET_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id), "creating the group id");
  return std::string(reinterpret_cast<const char*>(&id), sizeof id);
}

absl::StatusOr<NcclRank> JoinNcclGroup(backend::Backend* backend, int rank, int world,
                                       std::string_view id) {
  NoNvls();
  auto* cuda = dynamic_cast<backend::CudaBackend*>(backend);
  if (cuda == nullptr) {
    return InvalidArgumentError("tensor parallel over NCCL needs the CUDA backend, not {}",
                                backend->name());
  }
  if (id.size() != kTpIdBytes) {
    return InvalidArgumentError("tensor parallel: the group id has {} bytes, not {}", id.size(),
                                kTpIdBytes);
  }
  if (world < 1 || rank < 0 || rank >= world) {
    return InvalidArgumentError("tensor parallel: rank {} of a group of {}", rank, world);
  }
  GANNET_RETURN_IF_ERROR(cuda->BindThread());
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof uid);
  auto c = std::make_shared<Comm>();
  c->be = cuda;
  c->rank = rank;
  c->world = world;
  // ncclCommInitRank waits for every rank; a rank that never starts must not hang this one, so
  // the join runs on its own thread and is given up after GANNET_TP_JOIN_TIMEOUT_S (the thread
  // then aborts the communicator if the others ever arrive).
  struct Join {
    Mutex mu;
    CondVar cv;
    bool done ABSL_GUARDED_BY(mu) = false;
    bool abandoned ABSL_GUARDED_BY(mu) = false;
    ncclResult_t result ABSL_GUARDED_BY(mu) = ncclSuccess;
    ncclComm_t comm ABSL_GUARDED_BY(mu) = nullptr;
  };
  auto join = std::make_shared<Join>();
  const int device = cuda->device_id();
  std::thread([join, uid, world, rank, device] {
    ncclComm_t comm = nullptr;
    const ncclResult_t r = cudaSetDevice(device) == cudaSuccess
                               ? ncclCommInitRank(&comm, world, uid, rank)
                               : ncclUnhandledCudaError;
    MutexLock lock(&join->mu);
    if (join->abandoned) {
      if (r == ncclSuccess) ncclCommAbort(comm);
      return;
    }
    join->done = true;
    join->result = r;
    join->comm = comm;
    join->cv.NotifyAll();
  }).detach();
  const double timeout = JoinTimeoutSeconds();
  ncclResult_t joined;
  ncclComm_t comm;
  {
    MutexLock lock(&join->mu);
    if (!join->cv.WaitFor(join->mu, std::chrono::duration<double>(timeout),
                          [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(join->mu) { return join->done; })) {
      join->abandoned = true;
      return absl::DeadlineExceededError(fmt::format(
          "tensor parallel: rank {} waited {} s for the other {} ranks of the group to join; is "
          "every rank's process started with the same id (GANNET_TP_JOIN_TIMEOUT_S sets the wait)?",
          rank, timeout, world - 1));
    }
    joined = join->result;
    comm = join->comm;
  }
  GANNET_NCCL_RETURN_IF_ERROR(joined, "joining the group (rank " + std::to_string(rank) + ")");
  c->comm = comm;
  NcclRank out;
  auto collectives = std::make_unique<NcclCollectives>(c);
  // The small all-reduces over CUDA IPC peer memory when every rank can map every other's.
  CustomAllReduce::RankExchange exchange;
  exchange.all_gather = [&c](const std::string& mine) { return AllGatherBytes(*c, mine); };
  exchange.min_over_ranks = [&collectives](int64_t v) { return collectives->MinOverRanks(v); };
  GANNET_ASSIGN_OR_RETURN(c->custom,
                          CustomAllReduce::CreateAcrossProcesses(rank, world, device, exchange));
  out.collectives = std::move(collectives);
  out.channel = std::make_unique<NcclChannel>(c);
  return out;
}

#else  // !GANNET_HAVE_NCCL

bool NcclCompiled() { return false; }

absl::StatusOr<std::vector<std::unique_ptr<backend::Collectives>>> CreateNcclGroup(
    const std::vector<backend::Backend*>&) {
  return absl::UnimplementedError("tensor parallelism on CUDA needs NCCL, which this build lacks");
}
absl::StatusOr<std::string> CreateNcclId() {
  return absl::UnimplementedError(
      "tensor parallelism across processes needs NCCL, which this build lacks");
}
absl::StatusOr<NcclRank> JoinNcclGroup(backend::Backend*, int, int, std::string_view) {
  return absl::UnimplementedError(
      "tensor parallelism across processes needs NCCL, which this build lacks");
}

#endif

}  // namespace gannet::parallel
