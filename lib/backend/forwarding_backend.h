// A Backend that forwards every call to another one: the base of decorators that watch or alter
// some ops and pass the rest through (ProfilingBackend; the fault-injecting backends of tests).
// Thread safety: that of the wrapped backend.
#pragma once

#include <memory>
#include <string>

#include "lib/backend/backend.h"

namespace gannet::backend {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  std::string_view name() const override { return inner_->name(); }
  std::string DeviceName() const override { return inner_->DeviceName(); }
  int device_id() const override { return inner_->device_id(); }
  absl::Status BindThread() override { return inner_->BindThread(); }
  int64_t TotalMemoryBytes() const override { return inner_->TotalMemoryBytes(); }
  DType activation_dtype() const override { return inner_->activation_dtype(); }
  DType norm_input_dtype() const override { return inner_->norm_input_dtype(); }
  DType residual_dtype() const override { return inner_->residual_dtype(); }
  DType kv_dtype() const override { return inner_->kv_dtype(); }
  absl::StatusOr<Buffer> Allocate(size_t bytes) override { return inner_->Allocate(bytes); }
  absl::StatusOr<Buffer> AllocateZeroed(size_t bytes) override {
    return inner_->AllocateZeroed(bytes);
  }
  absl::Status CopyToDevice(void* d, const void* s, size_t n) override {
    return inner_->CopyToDevice(d, s, n);
  }
  absl::Status CopyToHost(void* d, const void* s, size_t n) override {
    return inner_->CopyToHost(d, s, n);
  }
  absl::Status Fill(Tensor t, float v) override { return inner_->Fill(t, v); }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  int64_t FreeMemoryBytes() const override { return inner_->FreeMemoryBytes(); }
  absl::Status BeginDeviceSpan() override { return inner_->BeginDeviceSpan(); }
  absl::Status EndDeviceSpan() override { return inner_->EndDeviceSpan(); }
  absl::StatusOr<double> DeviceSpanSeconds() override { return inner_->DeviceSpanSeconds(); }
  absl::StatusOr<OwnedTensor> LoadWeight(std::span<const model::WeightView* const> parts) override {
    return inner_->LoadWeight(parts);
  }
  absl::Status Embed(Tensor ids, Tensor table, float scale, Tensor out) override {
    return inner_->Embed(ids, table, scale, out);
  }
  absl::Status RmsNorm(Tensor x, Tensor w, float eps, Tensor out) override {
    return inner_->RmsNorm(x, w, eps, out);
  }
  absl::Status PostNormResidual(Tensor x, Tensor pw, Tensor r, Tensor s, Tensor nw, Tensor no,
                                float eps) override {
    return inner_->PostNormResidual(x, pw, r, s, nw, no, eps);
  }
  absl::Status Linear(Tensor x, Tensor w, Tensor out) override { return inner_->Linear(x, w, out); }
  absl::Status LinearGeluMul(Tensor x, Tensor w, Tensor gu, Tensor act) override {
    return inner_->LinearGeluMul(x, w, gu, act);
  }
  absl::Status GeluMulLinear(Tensor g, Tensor u, Tensor w, Tensor act, Tensor out) override {
    return inner_->GeluMulLinear(g, u, w, act, out);
  }
  absl::Status NormAddPostNormResidual(Tensor a, Tensor aw, Tensor b, Tensor bw, Tensor pw,
                                       Tensor r, Tensor s, Tensor nw, Tensor no,
                                       float eps) override {
    return inner_->NormAddPostNormResidual(a, aw, b, bw, pw, r, s, nw, no, eps);
  }
  absl::Status GeluTanhMul(Tensor g, Tensor u, Tensor out) override {
    return inner_->GeluTanhMul(g, u, out);
  }
  absl::Status Add(Tensor a, Tensor b, Tensor out) override { return inner_->Add(a, b, out); }
  absl::Status QkvPrep(const QkvPrepArgs& a) override { return inner_->QkvPrep(a); }
  absl::Status Attention(const AttentionArgs& a) override { return inner_->Attention(a); }
  absl::Status PleCombine(Tensor p, Tensor t, Tensor w, float ps, float cs, float eps,
                          Tensor out) override {
    return inner_->PleCombine(p, t, w, ps, cs, eps, out);
  }
  absl::Status MoeRoute(const MoeRouteArgs& a) override { return inner_->MoeRoute(a); }
  absl::Status MoeExperts(const MoeExpertsArgs& a) override { return inner_->MoeExperts(a); }
  absl::Status GatherRows(Tensor x, Tensor rows, Tensor out) override {
    return inner_->GatherRows(x, rows, out);
  }
  absl::Status Softcap(Tensor x, float cap) override { return inner_->Softcap(x, cap); }
  absl::Status CentroidLogits(Tensor h, Tensor t, Tensor c, Tensor o, Tensor s, Tensor l) override {
    return inner_->CentroidLogits(h, t, c, o, s, l);
  }
  absl::Status Clamp(Tensor x, float lo, float hi, Tensor out) override {
    return inner_->Clamp(x, lo, hi, out);
  }
  absl::Status VisionRope(Tensor x, Tensor positions, float theta) override {
    return inner_->VisionRope(x, positions, theta);
  }
  absl::Status SegmentAttention(const SegmentAttentionArgs& a) override {
    return inner_->SegmentAttention(a);
  }
  absl::Status ScatterSumRows(Tensor x, Tensor dest, float scale, Tensor out) override {
    return inner_->ScatterSumRows(x, dest, scale, out);
  }
  absl::Status Standardize(Tensor x, Tensor bias, Tensor scale) override {
    return inner_->Standardize(x, bias, scale);
  }
  absl::Status Sample(Tensor logits, Tensor params, Tensor banned, Tensor out) override {
    return inner_->Sample(logits, params, banned, out);
  }
  absl::Status ShardArgmax(Tensor logits, Tensor banned, int64_t id_offset, Tensor out) override {
    return inner_->ShardArgmax(logits, banned, id_offset, out);
  }
  // Graphs are not forwarded: a decorator sees every op only when steps run eagerly.

 protected:
  Backend& inner() { return *inner_; }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace gannet::backend
