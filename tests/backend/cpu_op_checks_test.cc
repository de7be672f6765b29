// The CPU backend's ops refuse operands that do not fit together, naming the op, instead of
// reading or writing past them (the CUDA backend makes the same checks; cuda_ops_test).
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/common/dtype.h"
#include "lib/model/weights.h"

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
  ExpectNamed(cpu.PostNormResidual(Host(x, {m, n}), Host(w, {n}), Host(res, {m, n}), Host(two, {2}),
                                   Tensor(), Tensor(), 1e-6f),
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
  ExpectNamed(cpu.PleCombine(Host(proj, {m, width}), Host(few, {1, width}), Host(w, {p}), 1.f, 1.f,
                             1e-6f, Host(out, {m, width})),
              "PleCombine");
  ExpectNamed(cpu.PleCombine(Host(proj, {m, width}), Host(tok, {m, width}), Host(w, {p}), 1.f, 1.f,
                             1e-6f, Host(few, {1, width})),
              "PleCombine");
  // The norm weight is read as f32: an i32 one of the right length is refused, not reinterpreted.
  std::vector<int32_t> wi(p, 1);
  ExpectNamed(cpu.PleCombine(Host(proj, {m, width}), Host(tok, {m, width}),
                             Tensor::Make(wi.data(), DType::kI32, {p}), 1.f, 1.f, 1e-6f,
                             Host(out, {m, width})),
              "PleCombine");
  EXPECT_TRUE(cpu.PleCombine(Host(proj, {m, width}), Host(tok, {m, width}), Host(w, {p}), 1.f, 1.f,
                             1e-6f, Host(out, {m, width}))
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
  // Indices are read as i32: f32 ones (2.0f is 0x40000000) are refused, not used as rows.
  std::vector<float> frows = {2.f, 0.f, 1.f};
  ExpectNamed(cpu.GatherRows(Host(x, {m, n}), Host(frows, {3}), Host(out, {m, n})), "GatherRows");
  ASSERT_TRUE(cpu.GatherRows(Host(x, {m, n}), r, Host(out, {m, n})).ok());
  ExpectNamed(cpu.Add(Host(x, {m, n}), Host(out, {m, n}), Host(narrow, {m, n - 1})), "Add");
  ASSERT_TRUE(cpu.Add(Host(x, {m, n}), Host(out, {m, n}), Host(out, {m, n})).ok());
  for (const float v : out) EXPECT_FLOAT_EQ(v, 4.f);
}

// A checkpoint tensor may start at any byte (safetensors.h serves it in place): LoadWeight gives
// an aligned tensor with the same values for a bf16 matrix, an f32 matrix and a bf16 vector
// (f32), each one byte off its alignment.
TEST(CpuOpChecksTest, MisalignedWeightsLoadAligned) {
  CpuBackend cpu;
  const std::vector<float> values = {1.5f, -2.25f, 3.0f, 0.5f, -0.125f, 4.0f};
  std::vector<char> bytes(64);
  auto view = [&](DType dt, std::vector<int64_t> shape) {
    char* at = bytes.data() + 1;  // one byte past an aligned start
    for (size_t i = 0; i < values.size(); ++i) {
      if (dt == DType::kF32) {
        std::memcpy(at + 4 * i, &values[i], 4);
      } else {
        const uint16_t b = FloatToBf16(values[i]);
        std::memcpy(at + 2 * i, &b, 2);
      }
    }
    model::WeightView v;
    v.name = "w";
    v.dtype = dt;
    v.shape = std::move(shape);
    v.data = at;
    return v;
  };
  for (const auto& [dt, shape] : {std::pair{DType::kBF16, std::vector<int64_t>{2, 3}},
                                  std::pair{DType::kF32, std::vector<int64_t>{2, 3}},
                                  std::pair{DType::kBF16, std::vector<int64_t>{6}}}) {
    const model::WeightView v = view(dt, shape);
    const model::WeightView* parts[] = {&v};
    auto w = cpu.LoadWeight(parts);
    ASSERT_TRUE(w.ok()) << w.status();
    const Tensor& t = w->tensor;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % (DTypeBits(t.dtype) / 8), 0u);
    EXPECT_NE(t.data, v.data);
    for (size_t i = 0; i < values.size(); ++i) {
      float got;
      if (t.dtype == DType::kF32) {
        got = t.as<float>()[i];
      } else {
        got = Bf16ToFloat(t.as<uint16_t>()[i]);
      }
      EXPECT_EQ(got, values[i]) << DTypeName(dt) << " element " << i;
    }
  }
}

// The router's tensors against x's hidden size and the expert count, and its outputs' shape.
TEST(CpuOpChecksTest, MoeRoute) {
  CpuBackend cpu;
  const int t = 2, h = 8, e = 4, k = 2;
  std::vector<float> x(t * h, 1.f), scale(h, 1.f), proj(e * h, 0.5f), per(e, 1.f), w(t * k),
      short_scale(h - 1, 1.f), short_per(e - 1, 1.f), wide_w(t * (k + 1));
  std::vector<int32_t> ids(t * (k + 1));
  auto args = [&] {
    MoeRouteArgs a;
    a.x = Host(x, {t, h});
    a.router_scale = Host(scale, {h});
    a.router_proj = Host(proj, {e, h});
    a.per_expert_scale = Host(per, {e});
    a.top_k = k;
    a.topk_ids = Tensor::Make(ids.data(), DType::kI32, {t, k});
    a.topk_weights = Host(w, {t, k});
    return a;
  };
  ASSERT_TRUE(cpu.MoeRoute(args()).ok());
  MoeRouteArgs a = args();
  a.router_scale = Host(short_scale, {h - 1});
  ExpectNamed(cpu.MoeRoute(a), "MoeRoute");
  a = args();
  a.per_expert_scale = Host(short_per, {e - 1});
  ExpectNamed(cpu.MoeRoute(a), "MoeRoute");
  a = args();
  a.router_proj = Host(proj, {e * 2, h / 2});
  ExpectNamed(cpu.MoeRoute(a), "MoeRoute");
  a = args();
  a.topk_weights = Host(wide_w, {t, k + 1});
  ExpectNamed(cpu.MoeRoute(a), "MoeRoute");
  a = args();
  a.topk_ids = Tensor::Make(ids.data(), DType::kI32, {t - 1, k});
  ExpectNamed(cpu.MoeRoute(a), "MoeRoute");
  for (const int top_k : {0, e + 1}) {
    a = args();
    a.top_k = top_k;
    ExpectNamed(cpu.MoeRoute(a), "MoeRoute");
  }
}

// The experts' weights against each other and x, the routing's shape and out's.
TEST(CpuOpChecksTest, MoeExperts) {
  CpuBackend cpu;
  const int t = 2, h = 8, e = 3, inter = 4, k = 2;
  std::vector<float> x(t * h, 1.f), gu(e * 2 * inter * h, 0.1f), dn(e * h * inter, 0.1f),
      w(t * k, 0.5f), out(t * h), narrow(t * (h - 1));
  std::vector<int32_t> ids = {0, 2, 1, 0};
  auto args = [&] {
    MoeExpertsArgs a;
    a.x = Host(x, {t, h});
    a.topk_ids = Tensor::Make(ids.data(), DType::kI32, {t, k});
    a.topk_weights = Host(w, {t, k});
    a.gate_up = Host(gu, {e, 2 * inter, h});
    a.down = Host(dn, {e, h, inter});
    a.out = Host(out, {t, h});
    return a;
  };
  ASSERT_TRUE(cpu.MoeExperts(args()).ok());
  MoeExpertsArgs a = args();
  a.down = Host(dn, {e, inter, h});
  ExpectNamed(cpu.MoeExperts(a), "MoeExperts");
  a = args();
  a.down = Host(dn, {1, h, e * inter});
  ExpectNamed(cpu.MoeExperts(a), "MoeExperts");
  a = args();
  a.topk_weights = Host(w, {t * k, 1});
  ExpectNamed(cpu.MoeExperts(a), "MoeExperts");
  a = args();
  a.out = Host(narrow, {t, h - 1});
  ExpectNamed(cpu.MoeExperts(a), "MoeExperts");
  a = args();
  a.topk_ids = Tensor::Make(ids.data(), DType::kI32, {t - 1, k});
  ExpectNamed(cpu.MoeExperts(a), "MoeExperts");
  ids[1] = e;  // an id past the experts
  ExpectNamed(cpu.MoeExperts(args()), "MoeExperts");
}

}  // namespace
}  // namespace gannet::backend
