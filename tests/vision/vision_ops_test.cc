// The backend's vision ops on the CPU (backend.h; docs/vision.md "Vision tower") on small
// hand-checkable cases, their argument checks, and the base class's Unimplemented default.
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"

namespace gannet::backend {
namespace {

Tensor F32(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor::Make(v.data(), DType::kF32, dims);
}
Tensor I32(std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
  return Tensor::Make(v.data(), DType::kI32, dims);
}

TEST(VisionOpsTest, ClampBoundsAndRefusesReversedBounds) {
  CpuBackend cpu;
  std::vector<float> x = {-3.f, -0.5f, 0.25f, 4.f}, out(4);
  ASSERT_TRUE(cpu.Clamp(F32(x, {4}), -1.f, 1.f, F32(out, {4})).ok());
  EXPECT_EQ(out, (std::vector<float>{-1.f, -0.5f, 0.25f, 1.f}));
  EXPECT_EQ(x[0], -3.f);  // the input is untouched
  EXPECT_EQ(cpu.Clamp(F32(x, {4}), 1.f, -1.f, F32(out, {4})).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> small(3);
  EXPECT_EQ(cpu.Clamp(F32(x, {4}), -1.f, 1.f, F32(small, {3})).code(),
            absl::StatusCode::kInvalidArgument);
}

// d = 8: dims {0,2} and {1,3} rotate by x (frequencies 1 and theta^-1/2), {4,6} and {5,7} by y.
TEST(VisionOpsTest, VisionRopeRotatesTheHalvesByXAndY) {
  CpuBackend cpu;
  const float theta = 100.f;
  std::vector<float> x(8);
  for (int i = 0; i < 8; ++i) x[i] = 0.1f * static_cast<float>(i + 1);
  const std::vector<float> orig = x;
  std::vector<int32_t> pos = {3, 5};
  ASSERT_TRUE(cpu.VisionRope(F32(x, {1, 1, 8}), I32(pos, {1, 2}), theta).ok());
  const float inv[2] = {1.f, 1.f / std::sqrt(theta)};
  for (int axis = 0; axis < 2; ++axis) {
    for (int i = 0; i < 2; ++i) {
      const float a = static_cast<float>(pos[axis]) * inv[i];
      const float x0 = orig[axis * 4 + i], x1 = orig[axis * 4 + i + 2];
      EXPECT_NEAR(x[axis * 4 + i], x0 * std::cos(a) - x1 * std::sin(a), 1e-6);
      EXPECT_NEAR(x[axis * 4 + i + 2], x1 * std::cos(a) + x0 * std::sin(a), 1e-6);
    }
  }
  std::vector<float> zero_pos_x = orig;
  std::vector<int32_t> origin = {0, 0};
  ASSERT_TRUE(cpu.VisionRope(F32(zero_pos_x, {1, 1, 8}), I32(origin, {1, 2}), theta).ok());
  EXPECT_EQ(zero_pos_x, orig);
  std::vector<float> odd(6);
  EXPECT_EQ(cpu.VisionRope(F32(odd, {1, 1, 6}), I32(pos, {1, 2}), theta).code(),
            absl::StatusCode::kInvalidArgument);
}

// Rows attend within their segment only; a one-row segment returns its own value.
TEST(VisionOpsTest, SegmentAttentionKeepsSegmentsApart) {
  CpuBackend cpu;
  const int t = 3, d = 4;
  std::vector<float> q(t * d), k(t * d), v(t * d), out(t * d, NAN);
  for (int i = 0; i < t * d; ++i) {
    q[i] = std::sin(0.3f * static_cast<float>(i));
    k[i] = std::cos(0.7f * static_cast<float>(i));
    v[i] = static_cast<float>(i);
  }
  std::vector<int32_t> seg = {0, 2, 3};
  SegmentAttentionArgs a;
  a.q = F32(q, {t, 1, d});
  a.k = F32(k, {t, 1, d});
  a.v = F32(v, {t, 1, d});
  a.out = F32(out, {t, 1, d});
  a.num_q_heads = a.num_kv_heads = 1;
  a.head_dim = d;
  a.seg_start = I32(seg, {3});
  a.host_seg_start = seg.data();
  a.num_segments = 2;
  ASSERT_TRUE(cpu.SegmentAttention(a).ok());
  for (int i = 0; i < d; ++i) EXPECT_FLOAT_EQ(out[2 * d + i], v[2 * d + i]);
  for (int r = 0; r < 2; ++r) {  // rows 0 and 1: a softmax mix of v rows 0 and 1 only
    float s[2];
    for (int j = 0; j < 2; ++j) {
      s[j] = 0;
      for (int i = 0; i < d; ++i) s[j] += q[r * d + i] * k[j * d + i];
    }
    const float p0 = 1.f / (1.f + std::exp(s[1] - s[0]));
    for (int i = 0; i < d; ++i) {
      EXPECT_NEAR(out[r * d + i], p0 * v[i] + (1 - p0) * v[d + i], 1e-4);
    }
  }
  std::vector<int32_t> short_seg = {0, 2, 2};
  a.seg_start = I32(short_seg, {3});
  a.host_seg_start = short_seg.data();
  EXPECT_EQ(cpu.SegmentAttention(a).code(), absl::StatusCode::kInvalidArgument);
}

TEST(VisionOpsTest, ScatterSumRowsPoolsAndChecksDestinations) {
  CpuBackend cpu;
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, out(4, NAN);
  std::vector<int32_t> dest = {1, -1, 1};
  ASSERT_TRUE(cpu.ScatterSumRows(F32(x, {3, 2}), I32(dest, {3}), 0.5f, F32(out, {2, 2})).ok());
  EXPECT_EQ(out, (std::vector<float>{0, 0, 3, 4}));
  std::vector<int32_t> past = {0, 2, 0};
  EXPECT_EQ(cpu.ScatterSumRows(F32(x, {3, 2}), I32(past, {3}), 1.f, F32(out, {2, 2})).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(VisionOpsTest, StandardizeSubtractsThenScales) {
  CpuBackend cpu;
  std::vector<float> x = {1, 2, 3, 4}, bias = {1, -1}, scale = {2, 0.5f};
  ASSERT_TRUE(cpu.Standardize(F32(x, {2, 2}), F32(bias, {2}), F32(scale, {2})).ok());
  EXPECT_EQ(x, (std::vector<float>{0, 1.5f, 4, 2.5f}));
  std::vector<float> wrong = {1, 2, 3};
  EXPECT_EQ(cpu.Standardize(F32(x, {2, 2}), F32(wrong, {3}), F32(scale, {2})).code(),
            absl::StatusCode::kInvalidArgument);
}

// A backend without the vision ops (the base class's versions) says so by type.
TEST(VisionOpsTest, BaseBackendAnswersUnimplemented) {
  CpuBackend cpu;
  std::vector<float> x(4);
  std::vector<int32_t> pos(2);
  EXPECT_EQ(cpu.Backend::Clamp(F32(x, {4}), 0, 1, F32(x, {4})).code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(cpu.Backend::VisionRope(F32(x, {1, 1, 4}), I32(pos, {1, 2}), 100.f).code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(cpu.Backend::SegmentAttention({}).code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(cpu.Backend::ScatterSumRows(F32(x, {2, 2}), I32(pos, {2}), 1, F32(x, {2, 2})).code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(cpu.Backend::Standardize(F32(x, {2, 2}), Tensor{}, Tensor{}).code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace gannet::backend
