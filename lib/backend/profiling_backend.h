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

#include "lib/backend/forwarding_backend.h"

namespace gannet::backend {

class ProfilingBackend final : public ForwardingBackend {
 public:
  explicit ProfilingBackend(std::unique_ptr<Backend> inner) : ForwardingBackend(std::move(inner)) {}
  ~ProfilingBackend() override;

  absl::Status CopyToDevice(void* d, const void* s, size_t n) override;
  absl::Status CopyToHost(void* d, const void* s, size_t n) override;
  absl::Status Embed(Tensor ids, Tensor table, float scale, Tensor out) override;
  absl::Status RmsNorm(Tensor x, Tensor w, float eps, Tensor out) override;
  absl::Status PostNormResidual(Tensor x, Tensor pw, Tensor r, Tensor s, Tensor nw, Tensor no,
                                float eps) override;
  absl::Status Linear(Tensor x, Tensor w, Tensor out) override;
  absl::Status GeluTanhMul(Tensor g, Tensor u, Tensor out) override;
  absl::Status GeluMulLinear(Tensor g, Tensor u, Tensor w, Tensor act, Tensor out) override;
  absl::Status LinearGeluMul(Tensor x, Tensor w, Tensor gu, Tensor act) override;
  absl::Status Add(Tensor a, Tensor b, Tensor out) override;
  absl::Status NormAddPostNormResidual(Tensor a, Tensor aw, Tensor b, Tensor bw, Tensor pw,
                                       Tensor r, Tensor s, Tensor nw, Tensor no,
                                       float eps) override;
  absl::Status QkvPrep(const QkvPrepArgs& a) override;
  absl::Status Attention(const AttentionArgs& a) override;
  absl::Status PleCombine(Tensor p, Tensor t, Tensor w, float ps, float cs, float eps,
                          Tensor out) override;
  absl::Status MoeRoute(const MoeRouteArgs& a) override;
  absl::Status MoeExperts(const MoeExpertsArgs& a) override;
  absl::Status GatherRows(Tensor x, Tensor rows, Tensor out) override;
  absl::Status Softcap(Tensor x, float cap) override;
  absl::Status CentroidLogits(Tensor h, Tensor t, Tensor c, Tensor o, Tensor s, Tensor l) override;
  absl::Status Sample(Tensor logits, Tensor params, Tensor banned, Tensor out) override;

 private:
  template <typename Fn>
  absl::Status Timed(const std::string& op, Fn&& fn);

  struct Total {
    double seconds = 0;
    int64_t calls = 0;
    double first_seconds = -1;
  };
  std::map<std::string, Total> totals_;
};

}  // namespace gannet::backend
