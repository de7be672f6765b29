// The CPU backend's ops refuse operands that do not fit together, naming the op, instead of
// reading or writing past them (the CUDA backend makes the same checks; cuda_ops_test).
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"

namespace gannet::backend {
namespace {

Tensor Host(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor::Make(v.data(), DType::kF32, dims);
}

void ExpectNamed(const absl::Status& st, const std::string& op) {
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find(op), std::string::npos) << st;
}

TEST(CpuOpChecksTest, PostNormResidual) {
  CpuBackend cpu;
  const int m = 2, n = 8;
  std::vector<float> x(m * n, 1.f), w(n, 1.f), res(m * n), wide(m * (n + 1)), short_w(n - 1, 1.f),
      two(2, 1.f), next(m * n), short_next((m - 1) * n);
  ExpectNamed(cpu.PostNormResidual(Host(x, {m, n}), Host(w, {n}), Host(wide, {m, n + 1}), Tensor(),
                                   Tensor(), Tensor(), 1e-6f),
              "PostNormResidual");
  ExpectNamed(cpu.PostNormResidual(Host(x, {m, n}), Host(short_w, {n - 1}), Host(res, {m, n}),
                                   Tensor(), Tensor(), Tensor(), 1e-6f),
              "PostNormResidual");
  ExpectNamed(cpu.PostNormResidual(Host(x, {m, n}), Host(w, {n}), Host(res, {m, n}),
                                   Host(two, {2}), Tensor(), Tensor(), 1e-6f),
              "PostNormResidual");
  ExpectNamed(cpu.PostNormResidual(Host(x, {m, n}), Host(w, {n}), Host(res, {m, n}), Tensor(),
                                   Host(short_w, {n - 1}), Host(next, {m, n}), 1e-6f),
              "PostNormResidual");
  ExpectNamed(cpu.PostNormResidual(Host(x, {m, n}), Host(w, {n}), Host(res, {m, n}), Tensor(),
                                   Tensor(), Host(short_next, {m - 1, n}), 1e-6f),
              "PostNormResidual");
  // What fits runs: residual += RmsNorm(x) * w with x all ones is +1 everywhere.
  ASSERT_TRUE(cpu.PostNormResidual(Host(x, {m, n}), Host(w, {n}), Host(res, {m, n}), Tensor(),
                                   Tensor(), Host(next, {m, n}), 0.f)
                  .ok());
  for (const float v : res) EXPECT_FLOAT_EQ(v, 1.f);
}

TEST(CpuOpChecksTest, PleCombine) {
  CpuBackend cpu;
  const int m = 2, p = 4, width = 8;
  std::vector<float> proj(m * width, 1.f), tok(m * width), out(m * width), w(p, 1.f),
      few(1 * width), none;
  ExpectNamed(cpu.PleCombine(Host(proj, {m, width}), Host(tok, {m, width}),
                             Tensor::Make(none.data(), DType::kF32, {0}), 1.f, 1.f, 1e-6f,
                             Host(out, {m, width})),
              "PleCombine");
  ExpectNamed(cpu.PleCombine(Host(proj, {m, width}), Host(few, {1, width}), Host(w, {p}), 1.f,
                             1.f, 1e-6f, Host(out, {m, width})),
              "PleCombine");
  ExpectNamed(cpu.PleCombine(Host(proj, {m, width}), Host(tok, {m, width}), Host(w, {p}), 1.f,
                             1.f, 1e-6f, Host(few, {1, width})),
              "PleCombine");
  EXPECT_TRUE(cpu.PleCombine(Host(proj, {m, width}), Host(tok, {m, width}), Host(w, {p}), 1.f,
                             1.f, 1e-6f, Host(out, {m, width}))
                  .ok());
}

TEST(CpuOpChecksTest, GatherRowsAndAdd) {
  CpuBackend cpu;
  const int m = 3, n = 4;
  std::vector<float> x(m * n, 2.f), out(m * n), narrow(m * (n - 1));
  std::vector<int32_t> rows = {2, 0, 1};
  const Tensor r = Tensor::Make(rows.data(), DType::kI32, {3});
  ExpectNamed(cpu.GatherRows(Host(x, {m, n}), r, Host(out, {m - 1, n})), "GatherRows");
  ExpectNamed(cpu.GatherRows(Host(x, {m, n}), r, Host(narrow, {m, n - 1})), "GatherRows");
  ASSERT_TRUE(cpu.GatherRows(Host(x, {m, n}), r, Host(out, {m, n})).ok());
  ExpectNamed(cpu.Add(Host(x, {m, n}), Host(out, {m, n}), Host(narrow, {m, n - 1})), "Add");
  ASSERT_TRUE(cpu.Add(Host(x, {m, n}), Host(out, {m, n}), Host(out, {m, n})).ok());
  for (const float v : out) EXPECT_FLOAT_EQ(v, 4.f);
}

}  // namespace
}  // namespace gannet::backend
