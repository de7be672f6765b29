// A Backend decorator that times every op (GANNET_PROFILE_OPS=1): each call is bracketed by
// Synchronize(), so the times are device time plus launch latency, op by op, and the summary
// (printed when the decorator is destroyed) says where a step's time goes. It serialises the
// device and defeats graph recording (capture fails on the synchronisation and the runner runs
// eagerly), so it is a diagnostic, never a production setting.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "lib/backend/backend.h"

namespace gannet::backend {

class ProfilingBackend final : public Backend {
 public:
  explicit ProfilingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  ~ProfilingBackend() override;

  std::string_view name() const override { return inner_->name(); }
  std::string DeviceName() const override { return inner_->DeviceName(); }
  int device_id() const override { return inner_->device_id(); }
  int64_t TotalMemoryBytes() const override { return inner_->TotalMemoryBytes(); }
  DType activation_dtype() const override { return inner_->activation_dtype(); }
  DType residual_dtype() const override { return inner_->residual_dtype(); }
  DType kv_dtype() const override { return inner_->kv_dtype(); }
  absl::StatusOr<Buffer> Allocate(size_t bytes) override { return inner_->Allocate(bytes); }
  absl::StatusOr<Buffer> AllocateZeroed(size_t bytes) override { return inner_->AllocateZeroed(bytes); }
  absl::Status CopyToDevice(void* d, const void* s, size_t n) override;
  absl::Status CopyToHost(void* d, const void* s, size_t n) override;
  absl::Status Fill(Tensor t, float v) override { return inner_->Fill(t, v); }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  int64_t FreeMemoryBytes() const override { return inner_->FreeMemoryBytes(); }
  absl::StatusOr<OwnedTensor> LoadWeight(std::span<const model::WeightView* const> parts) override {
    return inner_->LoadWeight(parts);
  }
  absl::Status Embed(Tensor ids, Tensor table, float scale, Tensor out) override;
  absl::Status RmsNorm(Tensor x, Tensor w, float eps, Tensor out) override;
  absl::Status PostNormResidual(Tensor x, Tensor pw, Tensor r, Tensor s, Tensor nw, Tensor no,
                                float eps) override;
  absl::Status Linear(Tensor x, Tensor w, Tensor out) override;
  absl::Status GeluTanhMul(Tensor g, Tensor u, Tensor out) override;
  absl::Status Add(Tensor a, Tensor b, Tensor out) override;
  absl::Status QkvPrep(const QkvPrepArgs& a) override;
  absl::Status Attention(const AttentionArgs& a) override;
  absl::Status PleCombine(Tensor p, Tensor t, Tensor w, float ps, float cs, float eps,
                          Tensor out) override;
  absl::Status MoeRoute(const MoeRouteArgs& a) override;
  absl::Status MoeExperts(const MoeExpertsArgs& a) override;
  absl::Status GatherRows(Tensor x, Tensor rows, Tensor out) override;
  absl::Status Softcap(Tensor x, float cap) override;
  absl::Status Sample(Tensor logits, Tensor params, Tensor banned, Tensor out) override;

 private:
  template <typename Fn>
  absl::Status Timed(const std::string& op, Fn&& fn);

  struct Total {
    double seconds = 0;
    int64_t calls = 0;
    double first_seconds = -1;
  };
  std::unique_ptr<Backend> inner_;
  std::map<std::string, Total> totals_;
};

}  // namespace gannet::backend
