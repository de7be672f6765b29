// The Backend ops whose default is a sequence of other ops (what a backend without a fused form
// runs: the CPU backend), against that sequence, and their shape checks.
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"

namespace gannet::backend {
namespace {

Tensor Host(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor::Make(v.data(), DType::kF32, dims);
}

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i) + 1.0f) * scale;
  return v;
}

// LinearGeluMul = Linear into gu, then GeluTanhMul of gu's halves, exactly; gu is written.
TEST(BackendDefaultsTest, LinearGeluMulIsTheProjectionThenTheProduct) {
  CpuBackend cpu;
  const int m = 3, k = 24, inter = 10;
  std::vector<float> x = Ramp(m * k, 1.5f), w = Ramp(2 * inter * k, 0.3f);
  std::vector<float> gu(m * 2 * inter, NAN), act(m * inter, NAN);
  std::vector<float> gu_ref(m * 2 * inter), act_ref(m * inter);
  ASSERT_TRUE(cpu.LinearGeluMul(Host(x, {m, k}), Host(w, {2 * inter, k}), Host(gu, {m, 2 * inter}),
                                Host(act, {m, inter}))
                  .ok());
  Tensor g = Host(gu_ref, {m, 2 * inter});
  ASSERT_TRUE(cpu.Linear(Host(x, {m, k}), Host(w, {2 * inter, k}), g).ok());
  ASSERT_TRUE(
      cpu.GeluTanhMul(g.Cols(0, inter), g.Cols(inter, inter), Host(act_ref, {m, inter})).ok());
  EXPECT_EQ(gu, gu_ref);
  EXPECT_EQ(act, act_ref);
  for (const float v : act) EXPECT_TRUE(std::isfinite(v));
}

// A gu that is not twice act's width is an error naming the op, not a crash.
TEST(BackendDefaultsTest, LinearGeluMulRefusesAMismatchedProjection) {
  CpuBackend cpu;
  const int m = 2, k = 8, inter = 4;
  std::vector<float> x(m * k, 1.f), w(2 * inter * k, 1.f), gu(m * 2 * inter), act(m * (inter + 1));
  const absl::Status st = cpu.LinearGeluMul(Host(x, {m, k}), Host(w, {2 * inter, k}),
                                            Host(gu, {m, 2 * inter}), Host(act, {m, inter + 1}));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("LinearGeluMul"), std::string::npos) << st;
}

// NormAddPostNormResidual's default ends in PostNormResidual, which names a residual, weight or
// scalar that does not match the rows instead of reading past them.
TEST(BackendDefaultsTest, NormAddPostNormResidualRefusesMismatchedOperands) {
  CpuBackend cpu;
  const int m = 2, n = 8;
  std::vector<float> a(m * n, 1.f), b(m * n, 2.f), w(n, 1.f), res(m * n), short_w(n - 1, 1.f),
      wide_res(m * (n + 1)), two(2, 1.f);
  auto join = [&](Tensor residual, Tensor post_weight, Tensor scalar) {
    return cpu.NormAddPostNormResidual(Host(a, {m, n}), Host(w, {n}), Host(b, {m, n}), Host(w, {n}),
                                       post_weight, residual, scalar, Tensor(), Tensor(), 1e-6f);
  };
  for (const absl::Status& st : {join(Host(wide_res, {m, n + 1}), Host(w, {n}), Tensor()),
                                 join(Host(res, {m, n}), Host(short_w, {n - 1}), Tensor()),
                                 join(Host(res, {m, n}), Host(w, {n}), Host(two, {2}))}) {
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find("PostNormResidual"), std::string::npos) << st;
  }
  EXPECT_TRUE(join(Host(res, {m, n}), Host(w, {n}), Tensor()).ok());
}

}  // namespace
}  // namespace gannet::backend
