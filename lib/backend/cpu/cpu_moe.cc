// MoE router (softmax over all experts -> top-k -> renormalise -> per_expert_scale) and the
// experts' gated MLPs on the CPU, as HF's Gemma4TextRouter / Gemma4TextExperts compute them.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cpu/cpu_math.h"

namespace gannet::backend {

absl::Status CpuBackend::MoeRoute(const MoeRouteArgs& a) {
  GANNET_RETURN_IF_ERROR(CheckMoeRouteShapes(a));
  GANNET_RETURN_IF_ERROR(cpu::RequireReadableWeight(a.router_proj, "MoeRoute router_proj"));
  const int64_t tokens = a.x.rows();
  const int64_t hidden = a.x.row_elems();
  const int64_t experts = a.router_proj.dim(0);
  const float root = 1.0f / std::sqrt(static_cast<float>(hidden));
  const float* scale = a.router_scale.as<float>();
  const float* per_expert = a.per_expert_scale.as<float>();
  pool().ParallelFor(tokens, 1, [&](int64_t b, int64_t e) {
    std::vector<float> u(hidden), w(hidden), logits(experts);
    std::vector<int> order(experts);
    cpu::ActivationRow act;
    for (int64_t t = b; t < e; ++t) {
      const float* x = a.x.as<float>() + t * a.x.stride0();
      float inv = cpu::RmsInvScale(x, hidden, a.eps);
      for (int64_t i = 0; i < hidden; ++i) u[i] = ((x[i] * inv) * scale[i]) * root;
      act.Reset();
      for (int64_t ex = 0; ex < experts; ++ex) {
        cpu::WeightRowToF32(a.router_proj, ex, hidden, w.data());
        logits[ex] = cpu::Dot(act.Get(a.router_proj, ex, u.data(), hidden), w.data(), hidden);
      }
      float mx = *std::max_element(logits.begin(), logits.end());
      double denom = 0;
      for (float& l : logits) {
        l = std::exp(l - mx);
        denom += l;
      }
      for (float& l : logits) l = static_cast<float>(l / denom);
      std::iota(order.begin(), order.end(), 0);
      // Highest probability first; ties go to the lower expert index.
      std::partial_sort(order.begin(), order.begin() + a.top_k, order.end(), [&](int i, int j) {
        return logits[i] > logits[j] || (logits[i] == logits[j] && i < j);
      });
      float sum = 0;
      for (int k = 0; k < a.top_k; ++k) sum += logits[order[k]];
      for (int k = 0; k < a.top_k; ++k) {
        a.topk_ids.as<int32_t>()[t * a.top_k + k] = order[k];
        a.topk_weights.as<float>()[t * a.top_k + k] =
            (logits[order[k]] / sum) * per_expert[order[k]];
      }
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::MoeExperts(const MoeExpertsArgs& a) {
  const int64_t tokens = a.x.rows();
  const int64_t hidden = a.x.row_elems();
  const int64_t experts = a.gate_up.dim(0);
  const int64_t inter = a.gate_up.dim(1) / 2;
  const int64_t top_k = a.topk_ids.row_elems();
  GANNET_RETURN_IF_ERROR(CheckMoeExpertsShapes(a));
  GANNET_RETURN_IF_ERROR(cpu::RequireReadableWeight(a.gate_up, "MoeExperts gate_up"));
  GANNET_RETURN_IF_ERROR(cpu::RequireReadableWeight(a.down, "MoeExperts down"));
  const int64_t total = MoeTotalExperts(a);
  for (int64_t i = 0; i < tokens * top_k; ++i) {
    int32_t ex = a.topk_ids.as<int32_t>()[i];
    if (ex < 0 || ex >= total) return InvalidArgumentError("MoeExperts: expert id {}", ex);
  }
  pool().ParallelFor(tokens, 1, [&](int64_t b, int64_t e) {
    std::vector<float> w(std::max(hidden, inter)), h(inter), gu(2 * inter);
    cpu::ActivationRow act_x, act_h;  // the inputs as W8A8 experts see them
    for (int64_t t = b; t < e; ++t) {
      act_x.Reset();
      const float* x = a.x.as<float>() + t * a.x.stride0();
      float* o = a.out.as<float>() + t * a.out.stride0();
      std::fill(o, o + hidden, 0.0f);
      for (int64_t k = 0; k < top_k; ++k) {
        const int64_t ex = a.topk_ids.as<int32_t>()[t * top_k + k] - a.expert_begin;
        if (ex < 0 || ex >= experts) continue;  // another rank's expert
        const float weight = a.topk_weights.as<float>()[t * top_k + k];
        for (int64_t r = 0; r < 2 * inter; ++r) {
          cpu::WeightRowToF32(a.gate_up, ex * 2 * inter + r, hidden, w.data());
          gu[r] = cpu::Dot(act_x.Get(a.gate_up, ex * 2 * inter + r, x, hidden), w.data(), hidden);
        }
        for (int64_t i = 0; i < inter; ++i) h[i] = cpu::GeluTanh(gu[i]) * gu[inter + i];
        act_h.Reset();
        for (int64_t r = 0; r < hidden; ++r) {
          cpu::WeightRowToF32(a.down, ex * hidden + r, inter, w.data());
          o[r] += cpu::Dot(act_h.Get(a.down, ex * hidden + r, h.data(), inter), w.data(), inter) *
                  weight;
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace gannet::backend
