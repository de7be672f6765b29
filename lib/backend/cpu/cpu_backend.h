// The CPU reference backend: every op of backend.h in plain C++ over host memory, fp32 activations,
// residual and KV, reading bf16/f16/f32 weights. It is the correctness oracle for every GPU kernel
// (and matches HF transformers' fp32 forward pass), so clarity beats speed here; loops are still
// spread over the process thread pool so tests on tiny models and small real models run quickly.
//
// Thread safety: one caller at a time (like every Backend). Ops run synchronously.
#pragma once

#include <memory>

#include "lib/backend/backend.h"
#include "lib/common/thread_pool.h"

namespace gannet::backend {

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(ThreadPool* pool = nullptr);

  std::string_view name() const override { return "cpu"; }
  std::string DeviceName() const override;
  int64_t TotalMemoryBytes() const override;  // physical RAM
  int64_t FreeMemoryBytes() const override;   // MemAvailable
  DType activation_dtype() const override { return DType::kF32; }
  DType residual_dtype() const override { return DType::kF32; }
  DType kv_dtype() const override { return DType::kF32; }

  absl::StatusOr<Buffer> Allocate(size_t bytes) override;
  absl::StatusOr<Buffer> AllocateZeroed(size_t bytes) override;
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override;
  absl::Status Fill(Tensor t, float value) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
  absl::StatusOr<OwnedTensor> LoadWeight(std::span<const model::WeightView* const> parts) override;

  absl::Status Embed(Tensor ids, Tensor table, float scale, Tensor out) override;
  absl::Status RmsNorm(Tensor x, Tensor weight, float eps, Tensor out) override;
  absl::Status PostNormResidual(Tensor x, Tensor post_weight, Tensor residual, Tensor scalar,
                                Tensor next_weight, Tensor next_out, float eps) override;
  absl::Status Linear(Tensor x, Tensor w, Tensor out) override;
  absl::Status GeluTanhMul(Tensor gate, Tensor up, Tensor out) override;
  absl::Status Add(Tensor a, Tensor b, Tensor out) override;
  absl::Status QkvPrep(const QkvPrepArgs& args) override;
  absl::Status Attention(const AttentionArgs& args) override;
  absl::Status PleCombine(Tensor proj, Tensor token_part, Tensor norm_w, float proj_scale,
                          float combine_scale, float eps, Tensor out) override;
  absl::Status MoeRoute(const MoeRouteArgs& args) override;
  absl::Status MoeExperts(const MoeExpertsArgs& args) override;
  absl::Status GatherRows(Tensor x, Tensor rows, Tensor out) override;
  absl::Status Softcap(Tensor x, float cap) override;
  absl::Status CentroidLogits(Tensor h, Tensor table, Tensor cluster_logits, Tensor ordering,
                              Tensor selected, Tensor logits) override;
  absl::Status Clamp(Tensor x, float lo, float hi, Tensor out) override;
  absl::Status VisionRope(Tensor x, Tensor positions, float theta) override;
  absl::Status SegmentAttention(const SegmentAttentionArgs& args) override;
  absl::Status ScatterSumRows(Tensor x, Tensor dest, float scale, Tensor out) override;
  absl::Status Standardize(Tensor x, Tensor bias, Tensor scale) override;
  absl::Status Sample(Tensor logits, Tensor params, Tensor banned, Tensor out_ids) override;
  absl::Status ShardArgmax(Tensor logits, Tensor banned, int64_t id_offset, Tensor out) override;

  ThreadPool& pool() const { return *pool_; }

 private:
  ThreadPool* pool_;
};

}  // namespace gannet::backend
