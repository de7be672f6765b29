#include "lib/backend/profiling_backend.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/logging.h"
#include "lib/common/status.h"

namespace gannet::backend {

namespace {

// An op named by its shape: the layers' projections are told apart by the weight's N x K, the
// token count by bucket (1, <= 64, more).
std::string ByShape(std::string_view op, const Tensor& x, const Tensor& w) {
  return fmt::format("{} m{} {}x{}", op, x.rows() <= 1 ? 1 : (x.rows() <= 64 ? 64 : 4096), w.dim(0),
                     w.row_elems());
}

}  // namespace

template <typename Fn>
absl::Status ProfilingBackend::Timed(const std::string& op, Fn&& fn) {
  GANNET_RETURN_IF_ERROR(inner().Synchronize());
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status st = fn();
  absl::Status sync = inner().Synchronize();
  Total& t = totals_[op];
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The first call of an op shape carries one-time work (cuBLASLt algorithm timing, workspace
  // growth): keep it out of the averages.
  if (t.first_seconds < 0) {
    t.first_seconds = seconds;
  } else {
    t.seconds += seconds;
    ++t.calls;
  }
  return st.ok() ? sync : st;
}

ProfilingBackend::~ProfilingBackend() {
  double all = 0;
  std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
  for (const auto& [op, t] : rows) all += t.seconds;
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  GANNET_LOG_WARNING("profile: {:.3f} s in ops (synchronised after each; first calls apart)", all);
  for (const auto& [op, t] : rows) {
    GANNET_LOG_WARNING(
        "profile: {:<34} {:9.3f} s {:5.1f}% {:9} calls {:9.2f} us/call (first {:.1f} ms)", op,
        t.seconds, all > 0 ? 100 * t.seconds / all : 0.0, t.calls,
        t.calls ? 1e6 * t.seconds / t.calls : 0.0, 1e3 * t.first_seconds);
  }
}

absl::Status ProfilingBackend::CopyToDevice(void* d, const void* s, size_t n) {
  return Timed("copy to device", [&] { return inner().CopyToDevice(d, s, n); });
}
absl::Status ProfilingBackend::CopyToHost(void* d, const void* s, size_t n) {
  return Timed("copy to host", [&] { return inner().CopyToHost(d, s, n); });
}
absl::Status ProfilingBackend::Embed(Tensor ids, Tensor table, float scale, Tensor out) {
  return Timed("embed", [&] { return inner().Embed(ids, table, scale, out); });
}
absl::Status ProfilingBackend::RmsNorm(Tensor x, Tensor w, float eps, Tensor out) {
  return Timed("rms_norm", [&] { return inner().RmsNorm(x, w, eps, out); });
}
absl::Status ProfilingBackend::PostNormResidual(Tensor x, Tensor pw, Tensor r, Tensor s, Tensor nw,
                                                Tensor no, float eps) {
  return Timed("post_norm_residual",
               [&] { return inner().PostNormResidual(x, pw, r, s, nw, no, eps); });
}
absl::Status ProfilingBackend::Linear(Tensor x, Tensor w, Tensor out) {
  return Timed(ByShape("linear", x, w), [&] { return inner().Linear(x, w, out); });
}
absl::Status ProfilingBackend::GeluTanhMul(Tensor g, Tensor u, Tensor out) {
  return Timed("gelu_tanh_mul", [&] { return inner().GeluTanhMul(g, u, out); });
}
absl::Status ProfilingBackend::GeluMulLinear(Tensor g, Tensor u, Tensor w, Tensor act, Tensor out) {
  return Timed(ByShape("gelu_mul_linear", g, w),
               [&] { return inner().GeluMulLinear(g, u, w, act, out); });
}
absl::Status ProfilingBackend::LinearGeluMul(Tensor x, Tensor w, Tensor gu, Tensor act) {
  return Timed(ByShape("linear_gelu_mul", x, w),
               [&] { return inner().LinearGeluMul(x, w, gu, act); });
}
absl::Status ProfilingBackend::Add(Tensor a, Tensor b, Tensor out) {
  return Timed("add", [&] { return inner().Add(a, b, out); });
}
absl::Status ProfilingBackend::NormAddPostNormResidual(Tensor a, Tensor aw, Tensor b, Tensor bw,
                                                       Tensor pw, Tensor r, Tensor s, Tensor nw,
                                                       Tensor no, float eps) {
  return Timed("norm_add_post_norm_residual", [&] {
    return inner().NormAddPostNormResidual(a, aw, b, bw, pw, r, s, nw, no, eps);
  });
}
absl::Status ProfilingBackend::QkvPrep(const QkvPrepArgs& a) {
  return Timed(fmt::format("qkv_prep hd{}", a.head_dim), [&] { return inner().QkvPrep(a); });
}
absl::Status ProfilingBackend::Attention(const AttentionArgs& a) {
  const bool decode = a.meta->max_query_len == 1;
  return Timed(fmt::format("attention {} hd{}", decode ? "decode" : "prefill", a.head_dim),
               [&] { return inner().Attention(a); });
}
absl::Status ProfilingBackend::PleCombine(Tensor p, Tensor t, Tensor w, float ps, float cs,
                                          float eps, Tensor out) {
  return Timed("ple_combine", [&] { return inner().PleCombine(p, t, w, ps, cs, eps, out); });
}
absl::Status ProfilingBackend::MoeRoute(const MoeRouteArgs& a) {
  return Timed("moe_route", [&] { return inner().MoeRoute(a); });
}
absl::Status ProfilingBackend::MoeExperts(const MoeExpertsArgs& a) {
  return Timed("moe_experts", [&] { return inner().MoeExperts(a); });
}
absl::Status ProfilingBackend::GatherRows(Tensor x, Tensor rows, Tensor out) {
  return Timed("gather_rows", [&] { return inner().GatherRows(x, rows, out); });
}
absl::Status ProfilingBackend::CentroidLogits(Tensor h, Tensor t, Tensor c, Tensor o, Tensor s,
                                              Tensor l) {
  return Timed("centroid logits", [&] { return inner().CentroidLogits(h, t, c, o, s, l); });
}

absl::Status ProfilingBackend::Softcap(Tensor x, float cap) {
  return Timed("softcap", [&] { return inner().Softcap(x, cap); });
}
absl::Status ProfilingBackend::Sample(Tensor logits, Tensor params, Tensor banned, Tensor out) {
  return Timed("sample", [&] { return inner().Sample(logits, params, banned, out); });
}

}  // namespace gannet::backend
