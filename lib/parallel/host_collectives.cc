#include "lib/parallel/host_collectives.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "lib/common/status.h"

namespace gannet::parallel {

namespace {

absl::Status GroupAborted() {
  return MarkDeviceLost(absl::AbortedError("tensor parallel: another rank of the group failed"));
}

class HostCollectives : public backend::Collectives {
 public:
  HostCollectives(HostGroup* group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size(); }
  void Abort() override { group_->Abort(); }

  absl::Status AllReduceSum(backend::Tensor x) override {
    if (x.dtype != DType::kF32 || !x.contiguous()) {
      return InvalidArgumentError(
          "tensor parallel (host): all-reduce of f32 contiguous tensors "
          "only, got {}",
          DTypeName(x.dtype));
    }
    GANNET_RETURN_IF_ERROR(Publish(x));
    const int64_t n = x.numel();
    sum_.assign(n, 0.0f);
    for (const backend::Tensor& t : group_->slots()) {
      if (t.numel() != n) return Mismatch();
      const float* p = t.as<float>();
      for (int64_t i = 0; i < n; ++i) sum_[i] += p[i];
    }
    GANNET_RETURN_IF_ERROR(group_->Barrier());  // every rank has read every slot
    std::memcpy(x.data, sum_.data(), n * sizeof(float));
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> MinOverRanks(int64_t v) override {
    group_->values()[rank_] = v;
    GANNET_RETURN_IF_ERROR(group_->Barrier());
    int64_t m = v;
    for (int64_t x : group_->values()) m = std::min(m, x);
    GANNET_RETURN_IF_ERROR(group_->Barrier());
    return m;
  }

  absl::Status AllGatherColumns(backend::Tensor blocks, backend::Tensor full) override {
    const int world = world_size();
    const int64_t rows = full.rows(), cols = full.row_elems() / world;
    if (blocks.dtype != DType::kF32 || full.dtype != DType::kF32 || !blocks.contiguous() ||
        blocks.numel() != rows * cols * world || full.row_elems() != cols * world) {
      return InvalidArgumentError(
          "tensor parallel (host): gather of {} f32 block elements into "
          "[{}, {}]",
          blocks.numel(), rows, full.row_elems());
    }
    GANNET_RETURN_IF_ERROR(Publish(blocks));
    const int64_t block = rows * cols;
    for (int r = 0; r < world; ++r) {
      const backend::Tensor& t = group_->slots()[r];
      if (t.numel() != blocks.numel()) return Mismatch();
      const float* src = t.as<float>() + r * block;
      if (r != rank_) std::memcpy(blocks.as<float>() + r * block, src, block * sizeof(float));
      for (int64_t i = 0; i < rows; ++i) {
        std::memcpy(full.as<float>() + i * full.stride0() + r * cols, src + i * cols,
                    cols * sizeof(float));
      }
    }
    return group_->Barrier();
  }

 private:
  absl::Status Publish(backend::Tensor t) {
    group_->slots()[rank_] = t;  // each rank writes only its own slot
    return group_->Barrier();
  }
  absl::Status Mismatch() {
    group_->Abort();
    return MarkDeviceLost(
        absl::InternalError("tensor parallel: ranks issued collectives of different shapes"));
  }

  HostGroup* group_;
  const int rank_;
  std::vector<float> sum_;
};

}  // namespace

namespace {

class HostChannel : public StepChannel {
 public:
  HostChannel(HostGroup* group, int rank) : group_(group), rank_(rank) {}
  absl::Status Send(std::span<const uint8_t> msg) override {
    group_->Push(msg);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<uint8_t>> Receive(double timeout_s) override {
    return group_->Pop(rank_, timeout_s);
  }

 private:
  HostGroup* group_;
  const int rank_;
};

}  // namespace

HostGroup::HostGroup(int world_size)
    : world_(world_size), slots_(world_size), values_(world_size), queues_(world_size) {}

std::unique_ptr<StepChannel> HostGroup::Channel(int rank) {
  return std::make_unique<HostChannel>(this, rank);
}

void HostGroup::Push(std::span<const uint8_t> msg) {
  MutexLock lock(&mu_);
  for (int r = 1; r < world_; ++r) queues_[r].emplace_back(msg.begin(), msg.end());
  cv_.NotifyAll();
}

absl::StatusOr<std::vector<uint8_t>> HostGroup::Pop(int rank, double timeout_s) {
  MutexLock lock(&mu_);
  if (!cv_.WaitFor(mu_, std::chrono::duration<double>(timeout_s),
                   [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                     return aborted_ || !queues_[rank].empty();
                   })) {
    return MarkDeviceLost(absl::DeadlineExceededError(
        fmt::format("tensor parallel: no message from rank 0 for {} s", timeout_s)));
  }
  if (aborted_) return GroupAborted();
  std::vector<uint8_t> msg = std::move(queues_[rank].front());
  queues_[rank].erase(queues_[rank].begin());
  return msg;
}

std::unique_ptr<backend::Collectives> HostGroup::Rank(int rank) {
  return std::make_unique<HostCollectives>(this, rank);
}

absl::Status HostGroup::Barrier() {
  MutexLock lock(&mu_);
  if (aborted_) return GroupAborted();
  if (++arrived_ == world_) {
    arrived_ = 0;
    ++generation_;
    cv_.NotifyAll();
    return absl::OkStatus();
  }
  const uint64_t gen = generation_;
  cv_.Wait(mu_,
           [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return generation_ != gen || aborted_; });
  return generation_ != gen ? absl::OkStatus() : GroupAborted();
}

void HostGroup::Abort() {
  MutexLock lock(&mu_);
  aborted_ = true;
  cv_.NotifyAll();
}

}  // namespace gannet::parallel
