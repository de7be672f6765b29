// The vision tower's ops on the CPU (backend.h; the math in docs/vision.md "Vision tower"), f32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cpu/cpu_math.h"

namespace gannet::backend {

absl::Status CpuBackend::Clamp(Tensor x, float lo, float hi, Tensor out) {
  GANNET_RETURN_IF_ERROR(CheckClampArgs(x, lo, hi, out));
  const float* p = x.as<float>();
  float* o = out.as<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) o[i] = std::min(std::max(p[i], lo), hi);
  return absl::OkStatus();
}

absl::Status CpuBackend::VisionRope(Tensor x, Tensor positions, float theta) {
  GANNET_RETURN_IF_ERROR(CheckVisionRopeArgs(x, positions));
  const int64_t t = x.dim(0), heads = x.dim(1), d = x.dim(2);
  const int64_t quarter = d / 4;
  // HF: inv_freq = 1 / theta^(arange(0, d/2, 2) / (d/2)), in f32; angle = f32(pos) * inv_freq.
  std::vector<float> inv_freq(quarter);
  for (int64_t i = 0; i < quarter; ++i) {
    inv_freq[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(d / 2));
  }
  const int32_t* pos = positions.as<int32_t>();
  pool().ParallelFor(t, 8, [&](int64_t b, int64_t e) {
    std::vector<float> cs(2 * quarter), sn(2 * quarter);
    for (int64_t r = b; r < e; ++r) {
      for (int axis = 0; axis < 2; ++axis) {
        const float p = static_cast<float>(pos[r * 2 + axis]);
        for (int64_t i = 0; i < quarter; ++i) {
          const float a = p * inv_freq[i];
          cs[axis * quarter + i] = std::cos(a);
          sn[axis * quarter + i] = std::sin(a);
        }
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* row = x.as<float>() + (r * heads + h) * d;
        for (int axis = 0; axis < 2; ++axis) {
          float* half = row + axis * 2 * quarter;
          for (int64_t i = 0; i < quarter; ++i) {
            const float c = cs[axis * quarter + i], s = sn[axis * quarter + i];
            const float x0 = half[i], x1 = half[i + quarter];
            half[i] = x0 * c - x1 * s;
            half[i + quarter] = x1 * c + x0 * s;
          }
        }
      }
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::SegmentAttention(const SegmentAttentionArgs& a) {
  GANNET_RETURN_IF_ERROR(CheckSegmentAttentionArgs(a));
  const int64_t d = a.head_dim, nq = a.num_q_heads, nkv = a.num_kv_heads;
  const int64_t group = nq / nkv;
  const int64_t rows = a.q.rows();
  // One work item per (query row, head); each finds its segment by the host copy.
  std::vector<int32_t> seg_of(rows);
  for (int s = 0; s < a.num_segments; ++s) {
    for (int32_t r = a.host_seg_start[s]; r < a.host_seg_start[s + 1]; ++r) seg_of[r] = s;
  }
  pool().ParallelFor(rows * nq, 4, [&](int64_t b, int64_t e) {
    std::vector<float> scores;
    std::vector<double> acc(d);
    for (int64_t item = b; item < e; ++item) {
      const int64_t r = item / nq, h = item % nq, kvh = h / group;
      const int32_t lo = a.host_seg_start[seg_of[r]], hi = a.host_seg_start[seg_of[r] + 1];
      const float* q = a.q.as<float>() + (r * nq + h) * d;
      scores.resize(hi - lo);
      float mx = -INFINITY;
      for (int32_t j = lo; j < hi; ++j) {
        const float s = cpu::Dot(q, a.k.as<float>() + (j * nkv + kvh) * d, d) * a.scale;
        scores[j - lo] = s;
        mx = std::max(mx, s);
      }
      double sum = 0;
      for (float& s : scores) {
        s = std::exp(s - mx);
        sum += s;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int32_t j = lo; j < hi; ++j) {
        const float* v = a.v.as<float>() + (j * nkv + kvh) * d;
        const double p = scores[j - lo] / sum;
        for (int64_t i = 0; i < d; ++i) acc[i] += p * v[i];
      }
      float* o = a.out.as<float>() + (r * nq + h) * d;
      for (int64_t i = 0; i < d; ++i) o[i] = static_cast<float>(acc[i]);
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::ScatterSumRows(Tensor x, Tensor dest, float scale, Tensor out) {
  GANNET_RETURN_IF_ERROR(CheckScatterSumRowsArgs(x, dest, out));
  const int64_t n = x.row_elems();
  const int32_t* to = dest.as<int32_t>();
  for (int64_t r = 0; r < x.rows(); ++r) {
    if (to[r] >= out.rows()) {
      return InvalidArgumentError("ScatterSumRows: row {} goes to {}, past out's {} rows", r, to[r],
                                  out.rows());
    }
  }
  std::fill(out.as<float>(), out.as<float>() + out.numel(), 0.0f);
  for (int64_t r = 0; r < x.rows(); ++r) {
    if (to[r] < 0) continue;
    const float* src = x.as<float>() + r * n;
    float* o = out.as<float>() + int64_t{to[r]} * n;
    for (int64_t i = 0; i < n; ++i) o[i] += scale * src[i];
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Standardize(Tensor x, Tensor bias, Tensor scale) {
  GANNET_RETURN_IF_ERROR(CheckStandardizeArgs(x, bias, scale));
  const int64_t n = x.row_elems();
  for (int64_t r = 0; r < x.rows(); ++r) {
    float* p = x.as<float>() + r * n;
    for (int64_t i = 0; i < n; ++i) p[i] = (p[i] - bias.as<float>()[i]) * scale.as<float>()[i];
  }
  return absl::OkStatus();
}

}  // namespace gannet::backend
