// Every non-attention op of the CUDA backend against the CPU backend, in the dtypes the runner
// uses (bf16 activations, f32 residual and logits), plus synthetic weights generated on the GPU
// against model::FillSyntheticBf16 and GPU sampling against the CPU definition.
//
// Tolerances (stated per check): f32 results that only reorder f32 sums of identical bf16
// products: rel-L2 1e-5; results stored as bf16: rel-L2 1e-2 (one bf16 rounding, 2^-9, plus
// reordering); exact where the computation is a copy.
#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "kernels/gemm/gemv.h"
#include "kernels/moe/moe_entries.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cuda/cuda_linear.h"
#include "lib/common/status.h"
#include "lib/model/synthetic.h"
#include "tests/backend/cuda_test_util.h"
#include "tests/testing/fp8_kv.h"

namespace gannet {
namespace {

using backend::Tensor;
using testing::DeviceTensor;
using testing::Download;
using testing::RandomNormal;
using testing::RelL2;
using testing::Upload;
using testing::UploadI32;

constexpr double kF32Tol = 1e-5;
constexpr double kBf16Tol = 1e-2;

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
    auto b = backend::CudaBackend::Create(0);
    ASSERT_TRUE(b.ok()) << b.status();
    gpu_ = std::move(*b);
  }
  static Tensor Host(std::vector<float>& v, std::initializer_list<int64_t> dims) {
    return Tensor::Make(v.data(), DType::kF32, dims);
  }
  std::unique_ptr<backend::CudaBackend> gpu_;
  backend::CpuBackend cpu_;
};

TEST_F(CudaOpsTest, EmbedScalesRowsExactly) {
  const int vocab = 1000, width = 520, n = 37;
  std::vector<float> table = RandomNormal(vocab * width, 1, 0.05f);
  std::vector<float> ids_f(n);
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = (i * 7919) % vocab, ids_f[i] = static_cast<float>(ids[i]);
  std::vector<float> ref(n * width);
  std::vector<uint16_t> table_bf16(table.size());
  for (size_t i = 0; i < table.size(); ++i) table_bf16[i] = FloatToBf16(table[i]);
  ASSERT_TRUE(cpu_.Embed(Tensor::Make(ids.data(), DType::kI32, {n}),
                         Tensor::Make(table_bf16.data(), DType::kBF16, {vocab, width}), 73.5f,
                         Host(ref, {n, width}))
                  .ok());
  DeviceTensor dt = Upload(*gpu_, table, DType::kBF16, {vocab, width});
  DeviceTensor di = UploadI32(*gpu_, ids, {n});
  DeviceTensor out = Upload(*gpu_, std::vector<float>(n * width), DType::kF32, {n, width});
  ASSERT_TRUE(gpu_->Embed(di.t, dt.t, 73.5f, out.t).ok());
  EXPECT_EQ(Download(*gpu_, out.t), ref);  // bf16 value times the same f32 scale: exact
}

// The E2B/E4B drafters' centroid head at the released geometry (262144 tokens in 2048 clusters,
// top 32, width 256) and an odd small one: the same clusters picked (ties to the lower index),
// -inf everywhere else, and the scored logits equal to f32 dots of bf16 values (rel-L2 1e-5).
TEST_F(CudaOpsTest, CentroidLogitsMatchCpu) {
  struct Geometry {
    int vocab, clusters, top_k, width, rows;
  };
  for (const Geometry& g : {Geometry{262144, 2048, 32, 256, 3}, Geometry{96, 8, 3, 40, 5}}) {
    const int per = g.vocab / g.clusters;
    std::vector<float> h = RandomNormal(static_cast<size_t>(g.rows) * g.width, 11, 1.0f);
    std::vector<float> table = RandomNormal(static_cast<size_t>(g.vocab) * g.width, 12, 0.05f);
    std::vector<float> cl = RandomNormal(static_cast<size_t>(g.rows) * g.clusters, 13, 1.0f);
    cl[5] = cl[6];  // a tie: the lower cluster must win on both backends
    std::vector<int32_t> ordering(g.vocab);
    std::iota(ordering.begin(), ordering.end(), 0);
    uint64_t x = 99;
    for (int i = g.vocab - 1; i > 0; --i) {  // a permutation: clusters are not id ranges
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(ordering[i], ordering[(x >> 33) % (i + 1)]);
    }
    // bf16 inputs on both sides (h is bf16 on the GPU; the CPU gets the rounded values).
    for (float& v : h) v = Bf16ToFloat(FloatToBf16(v));
    std::vector<uint16_t> table_bf16(table.size());
    for (size_t i = 0; i < table.size(); ++i) table_bf16[i] = FloatToBf16(table[i]);
    std::vector<float> ref(static_cast<size_t>(g.rows) * g.vocab);
    std::vector<int32_t> ref_sel(static_cast<size_t>(g.rows) * g.top_k);
    ASSERT_TRUE(
        cpu_.CentroidLogits(Host(h, {g.rows, g.width}),
                            Tensor::Make(table_bf16.data(), DType::kBF16, {g.vocab, g.width}),
                            Host(cl, {g.rows, g.clusters}),
                            Tensor::Make(ordering.data(), DType::kI32, {g.clusters, per}),
                            Tensor::Make(ref_sel.data(), DType::kI32, {g.rows, g.top_k}),
                            Host(ref, {g.rows, g.vocab}))
            .ok());
    DeviceTensor dh = Upload(*gpu_, h, DType::kBF16, {g.rows, g.width});
    DeviceTensor dt = Upload(*gpu_, table, DType::kBF16, {g.vocab, g.width});
    DeviceTensor dc = Upload(*gpu_, cl, DType::kF32, {g.rows, g.clusters});
    DeviceTensor dord = UploadI32(*gpu_, ordering, {g.clusters, per});
    DeviceTensor dsel =
        UploadI32(*gpu_, std::vector<int32_t>(ref_sel.size(), -1), {g.rows, g.top_k});
    DeviceTensor dout =
        Upload(*gpu_, std::vector<float>(ref.size(), 7.0f), DType::kF32, {g.rows, g.vocab});
    ASSERT_TRUE(gpu_->CentroidLogits(dh.t, dt.t, dc.t, dord.t, dsel.t, dout.t).ok());
    const std::vector<float> got = Download(*gpu_, dout.t);
    std::vector<int32_t> sel(ref_sel.size());
    ASSERT_TRUE(gpu_->CopyToHost(sel.data(), dsel.t.data, sel.size() * 4).ok());
    EXPECT_EQ(sel, ref_sel) << g.vocab;
    std::vector<float> a, b;
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_EQ(std::isinf(got[i]), std::isinf(ref[i])) << "index " << i;
      if (std::isinf(ref[i])) continue;
      a.push_back(got[i]);
      b.push_back(ref[i]);
    }
    EXPECT_EQ(a.size(), static_cast<size_t>(g.rows) * g.top_k * per);
    EXPECT_LE(RelL2(a, b), kF32Tol) << g.vocab;
  }
}

// Hidden sizes of E2B (1536), 26B-A4B (2816), 31B (5376) and one past the register-resident
// kernel's 8192 limit (the generic kernel), so every PostNormResidual launch path is checked.
class CudaNormTest : public CudaOpsTest, public ::testing::WithParamInterface<int> {};
INSTANTIATE_TEST_SUITE_P(HiddenSizes, CudaNormTest, ::testing::Values(1536, 2816, 5376, 8200));

TEST_P(CudaNormTest, RmsNormAndPostNormResidual) {
  const int t = 9, h = GetParam();
  std::vector<float> x = RandomNormal(t * h, 2, 3.0f, false);
  std::vector<float> w = RandomNormal(h, 3, 0.3f);
  for (float& v : w) v += 1.0f;
  // RmsNorm: f32 residual in, bf16 out (as the runner's input norm).
  std::vector<float> ref(t * h);
  ASSERT_TRUE(cpu_.RmsNorm(Host(x, {t, h}), Host(w, {h}), 1e-6f, Host(ref, {t, h})).ok());
  DeviceTensor dx = Upload(*gpu_, x, DType::kF32, {t, h});
  DeviceTensor dw = Upload(*gpu_, w, DType::kF32, {h});
  DeviceTensor dout = Upload(*gpu_, std::vector<float>(t * h), DType::kBF16, {t, h});
  ASSERT_TRUE(gpu_->RmsNorm(dx.t, dw.t, 1e-6f, dout.t).ok());
  EXPECT_LE(RelL2(Download(*gpu_, dout.t), ref), kBf16Tol);
  // Without a weight, in place on f32 (the MoE block's norms of the fp16 path).
  std::vector<float> ref_nw(t * h);
  ASSERT_TRUE(cpu_.RmsNorm(Host(x, {t, h}), Tensor(), 1e-6f, Host(ref_nw, {t, h})).ok());
  DeviceTensor dxi = Upload(*gpu_, x, DType::kF32, {t, h});
  ASSERT_TRUE(gpu_->RmsNorm(dxi.t, Tensor(), 1e-6f, dxi.t).ok());
  EXPECT_LE(RelL2(Download(*gpu_, dxi.t), ref_nw), kF32Tol);

  // PostNormResidual: bf16 branch output, f32 residual, layer scalar, next norm to bf16.
  std::vector<float> branch = RandomNormal(t * h, 4, 2.0f);
  std::vector<float> nw = RandomNormal(h, 5, 0.3f);
  std::vector<float> scalar = {0.75f};
  std::vector<float> res_ref = x, next_ref(t * h);
  ASSERT_TRUE(cpu_.PostNormResidual(Host(branch, {t, h}), Host(w, {h}), Host(res_ref, {t, h}),
                                    Host(scalar, {1}), Host(nw, {h}), Host(next_ref, {t, h}), 1e-6f)
                  .ok());
  DeviceTensor db = Upload(*gpu_, branch, DType::kBF16, {t, h});
  DeviceTensor dnw = Upload(*gpu_, nw, DType::kF32, {h});
  DeviceTensor ds = Upload(*gpu_, scalar, DType::kF32, {1});
  ASSERT_TRUE(gpu_->PostNormResidual(db.t, dw.t, dx.t, ds.t, dnw.t, dout.t, 1e-6f).ok());
  EXPECT_LE(RelL2(Download(*gpu_, dx.t), res_ref), kF32Tol);  // f32 residual
  EXPECT_LE(RelL2(Download(*gpu_, dout.t), next_ref), kBf16Tol);
  // Without scalar and next norm (the PLE path's first call).
  std::vector<float> res2 = res_ref;
  ASSERT_TRUE(cpu_.PostNormResidual(Host(branch, {t, h}), Host(w, {h}), Host(res2, {t, h}),
                                    Tensor(), Tensor(), Tensor(), 1e-6f)
                  .ok());
  ASSERT_TRUE(gpu_->PostNormResidual(db.t, dw.t, dx.t, Tensor(), Tensor(), Tensor(), 1e-6f).ok());
  EXPECT_LE(RelL2(Download(*gpu_, dx.t), res2), kF32Tol);
  // A next norm weight or scalar of the wrong length is named, not read past.
  DeviceTensor short_nw = Upload(*gpu_, std::vector<float>(h - 1, 1.f), DType::kF32, {h - 1});
  DeviceTensor two = Upload(*gpu_, {1.f, 1.f}, DType::kF32, {2});
  for (const absl::Status& st :
       {gpu_->PostNormResidual(db.t, dw.t, dx.t, ds.t, short_nw.t, dout.t, 1e-6f),
        gpu_->PostNormResidual(db.t, dw.t, dx.t, two.t, dnw.t, dout.t, 1e-6f)}) {
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find("PostNormResidual"), std::string::npos) << st;
  }
}

// A MoE layer's join (NormAddPostNormResidual): the CUDA backend's one kernel against the four
// ops it replaces (the Backend default, run on the same GPU), bit for bit, for decode row counts
// up to the fused limit and past it (rows 65: the default path), with and without the layer
// scalar and the next norm; and against the CPU backend.
TEST_P(CudaNormTest, NormAddPostNormResidualIsTheFourOpsBitForBit) {
  const int h = GetParam();
  for (int t : {1, 7, 64, 65}) {
    for (bool with_next : {true, false}) {
      SCOPED_TRACE("rows " + std::to_string(t) + (with_next ? " with" : " without") + " next norm");
      std::vector<float> a = RandomNormal(t * h, 11, 2.0f), b = RandomNormal(t * h, 12, 0.5f);
      std::vector<float> res = RandomNormal(t * h, 13, 3.0f, false);
      std::vector<float> aw = RandomNormal(h, 14, 0.3f), bw = RandomNormal(h, 15, 0.3f);
      std::vector<float> pw = RandomNormal(h, 16, 0.3f), nw = RandomNormal(h, 17, 0.3f);
      for (float& v : pw) v += 1.0f;
      std::vector<float> scalar = {0.625f};
      // [0] the fused op, [1] the four ops (the base class's default on the same GPU).
      std::vector<DeviceTensor> da, db, dres, dnext;
      for (int k = 0; k < 2; ++k) {
        da.push_back(Upload(*gpu_, a, DType::kBF16, {t, h}));
        db.push_back(Upload(*gpu_, b, DType::kBF16, {t, h}));
        dres.push_back(Upload(*gpu_, res, DType::kF32, {t, h}));
        dnext.push_back(Upload(*gpu_, std::vector<float>(t * h), DType::kBF16, {t, h}));
      }
      DeviceTensor daw = Upload(*gpu_, aw, DType::kF32, {h}),
                   dbw = Upload(*gpu_, bw, DType::kF32, {h});
      DeviceTensor dpw = Upload(*gpu_, pw, DType::kF32, {h}),
                   dnw = Upload(*gpu_, nw, DType::kF32, {h});
      DeviceTensor ds = Upload(*gpu_, scalar, DType::kF32, {1});
      const Tensor s_t = with_next ? ds.t : Tensor(), nw_t = with_next ? dnw.t : Tensor();
      ASSERT_TRUE(gpu_->NormAddPostNormResidual(da[0].t, daw.t, db[0].t, dbw.t, dpw.t, dres[0].t,
                                                s_t, nw_t, with_next ? dnext[0].t : Tensor(), 1e-6f)
                      .ok());
      ASSERT_TRUE(gpu_->Backend::NormAddPostNormResidual(da[1].t, daw.t, db[1].t, dbw.t, dpw.t,
                                                         dres[1].t, s_t, nw_t,
                                                         with_next ? dnext[1].t : Tensor(), 1e-6f)
                      .ok());
      const std::vector<float> r0 = Download(*gpu_, dres[0].t), r1 = Download(*gpu_, dres[1].t);
      const std::vector<float> n0 = Download(*gpu_, dnext[0].t), n1 = Download(*gpu_, dnext[1].t);
      for (int64_t i = 0; i < int64_t{t} * h; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(r0[i]), std::bit_cast<uint32_t>(r1[i]))
            << "residual " << i;
        ASSERT_EQ(std::bit_cast<uint32_t>(n0[i]), std::bit_cast<uint32_t>(n1[i])) << "next " << i;
      }
      // And the CPU backend's four ops, on f32 host tensors: its normed branches and their sum
      // are not rounded to bf16, so the residual agrees to bf16 precision, not f32's.
      std::vector<float> ha = a, hb = b, hres = res, hnext(t * h);
      ASSERT_TRUE(cpu_.NormAddPostNormResidual(Host(ha, {t, h}), Host(aw, {h}), Host(hb, {t, h}),
                                               Host(bw, {h}), Host(pw, {h}), Host(hres, {t, h}),
                                               with_next ? Host(scalar, {1}) : Tensor(),
                                               with_next ? Host(nw, {h}) : Tensor(),
                                               with_next ? Host(hnext, {t, h}) : Tensor(), 1e-6f)
                      .ok());
      EXPECT_LE(RelL2(r0, hres), kBf16Tol);
      if (with_next) {
        EXPECT_LE(RelL2(n0, hnext), kBf16Tol);
      }
    }
  }
}

// Linear over the shapes that matter, through both paths (GEMV and cuBLASLt) and the timed choice,
// with bf16 weights and (the fp16 compute path) f16 weights, x and out of the weight's type or f32.
// M covers each of the GEMV's accumulator buckets (1, 2, 3-4, 5-8).
TEST_F(CudaOpsTest, LinearMatchesCpuOnEveryPath) {
  struct Shape {
    int m, n, k;
    bool x_f32, out_f32, col_view;
  };
  const Shape shapes[] = {
      {1, 4096, 5376, false, false, false}, {4, 5376, 8192, false, false, false},
      {8, 1000, 2816, false, true, true},   {16, 768, 5376, false, false, false},
      {128, 512, 2560, true, false, false}, {3, 256, 40, true, true, false},
      {5, 48, 24, false, false, true},      {2, 2560, 1536, true, false, true},
      {6, 520, 704, false, true, false}};
  for (const DType wt : {DType::kBF16, DType::kF16})
    for (const Shape& s : shapes) {
      std::vector<float> x = RandomNormal(s.m * s.k, 6);
      std::vector<float> w = RandomNormal(static_cast<size_t>(s.n) * s.k, 7, 1.0f / std::sqrt(s.k));
      std::vector<float> ref(s.m * s.n);
      std::vector<uint16_t> wb(w.size());
      for (size_t i = 0; i < w.size(); ++i) wb[i] = FloatToBf16(w[i]);
      ASSERT_TRUE(cpu_.Linear(Host(x, {s.m, s.k}),
                              Tensor::Make(wb.data(), DType::kBF16, {s.n, s.k}),
                              Host(ref, {s.m, s.n}))
                      .ok());
      DeviceTensor dw = Upload(*gpu_, w, wt, {s.n, s.k});
      // A column view: x and out live inside wider matrices (the fused QKV layout).
      const int pad = s.col_view ? 24 : 0;
      std::vector<float> xw(static_cast<size_t>(s.m) * (s.k + pad), 0.f);
      for (int i = 0; i < s.m; ++i)
        std::copy(x.begin() + i * s.k, x.begin() + (i + 1) * s.k, xw.begin() + i * (s.k + pad));
      DeviceTensor dx = Upload(*gpu_, xw, s.x_f32 ? DType::kF32 : wt, {s.m, s.k + pad});
      DeviceTensor dout = Upload(*gpu_, std::vector<float>(static_cast<size_t>(s.m) * (s.n + pad)),
                                 s.out_f32 ? DType::kF32 : wt, {s.m, s.n + pad});
      Tensor xv = s.col_view ? dx.t.Cols(0, s.k) : dx.t;
      Tensor ov = s.col_view ? dout.t.Cols(0, s.n) : dout.t;
      for (auto path :
           {std::optional<backend::CudaLinear::Path>(backend::CudaLinear::Path::kGemv),
            std::optional<backend::CudaLinear::Path>(backend::CudaLinear::Path::kCublasLt),
            std::optional<backend::CudaLinear::Path>()}) {
        gpu_->linear().Force(path);
        auto used = gpu_->linear().Run(xv, dw.t, ov);
        ASSERT_TRUE(used.ok()) << used.status();
        std::vector<float> got = Download(*gpu_, dout.t), gv(s.m * s.n);
        for (int i = 0; i < s.m; ++i)
          std::copy(got.begin() + i * (s.n + pad), got.begin() + i * (s.n + pad) + s.n,
                    gv.begin() + i * s.n);
        // f32 x is rounded to bf16 on the cuBLASLt path (the CPU multiplies it in f32).
        const double tol = s.out_f32 && !s.x_f32 ? kF32Tol * 10 : kBf16Tol;
        EXPECT_LE(RelL2(gv, ref), tol)
            << DTypeName(wt) << " M=" << s.m << " N=" << s.n << " K=" << s.k << " path "
            << (used->path == backend::CudaLinear::Path::kGemv ? "gemv" : "cublasLt");
      }
    }
  gpu_->linear().Force(std::nullopt);
}

// Every cuBLASLt candidate the tuning may pick (the heuristic's algos and their unsplit, clustered
// variants, CublasLtCandidates) gives the CPU's product, at decode-step shapes where the
// heuristic splits K; on sm_90 some of them are variants. A pin past the last is refused.
TEST_F(CudaOpsTest, EveryCublasCandidateMatchesCpu) {
  struct Shape {
    int m, n, k;
  };
  const Shape shapes[] = {{80, 1024, 6144}, {64, 640, 8192}, {33, 1536, 2048}, {128, 512, 2560}};
  int variants = 0;
  for (const Shape& s : shapes) {
    std::vector<float> x = RandomNormal(s.m * s.k, 16);
    std::vector<float> w = RandomNormal(static_cast<size_t>(s.n) * s.k, 17, 1.0f / std::sqrt(s.k));
    std::vector<float> ref(s.m * s.n);
    std::vector<uint16_t> wb(w.size());
    for (size_t i = 0; i < w.size(); ++i) wb[i] = FloatToBf16(w[i]);
    for (float& v : x) v = Bf16ToFloat(FloatToBf16(v));  // as the GPU's bf16 x holds it
    ASSERT_TRUE(cpu_.Linear(Host(x, {s.m, s.k}), Tensor::Make(wb.data(), DType::kBF16, {s.n, s.k}),
                            Host(ref, {s.m, s.n}))
                    .ok());
    // bf16 weights, and the fp16 compute path's f16; out of the weight's type or f32 (logits).
    for (const DType wt : {DType::kBF16, DType::kF16})
      for (const bool out_f32 : {false, true}) {
        DeviceTensor dw = Upload(*gpu_, w, wt, {s.n, s.k});
        DeviceTensor dx = Upload(*gpu_, x, wt, {s.m, s.k});
        DeviceTensor dout =
            Upload(*gpu_, std::vector<float>(s.m * s.n), out_f32 ? DType::kF32 : wt, {s.m, s.n});
        int candidates = 1;
        for (int r = 0; r < candidates; ++r) {
          gpu_->linear().PinCandidate(r);
          auto used = gpu_->linear().Run(dx.t, dw.t, dout.t);
          ASSERT_TRUE(used.ok()) << used.status();
          ASSERT_EQ(used->algo_rank, r);
          candidates = used->candidates;
          if (r == 0) variants += used->variants;
          EXPECT_LE(RelL2(Download(*gpu_, dout.t), ref), kBf16Tol)
              << DTypeName(wt) << (out_f32 ? " out f32" : "") << " M=" << s.m << " N=" << s.n
              << " K=" << s.k << " candidate " << r << " of " << candidates
              << (r >= candidates - used->variants ? " (variant)" : "");
        }
        gpu_->linear().PinCandidate(candidates);
        auto past = gpu_->linear().Run(dx.t, dw.t, dout.t);
        EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange) << past.status();
      }
  }
  gpu_->linear().PinCandidate(std::nullopt);
  if (gpu_->device_info().sm / 10 == 9) {
    EXPECT_GT(variants, 0);
  }
}

// The GEMV's tiles (kernels::GemvTile: how many output rows a CTA takes and how many loads its
// threads keep in flight) sum every output in the same order, so at M = 1 each gives the four-row
// tile's bits, plain and gated, for every operand type, over shapes with ragged CTAs and K tails;
// LaunchGemv refuses the deep tiles above M = 1. The timed choice (CudaLinear) may then take any.
TEST_F(CudaOpsTest, GemvTilesGiveTheSameBits) {
  struct Shape {
    int n, k;
  };
  const Shape shapes[] = {{1536, 6144}, {2561, 1544}, {7, 40}, {520, 704}, {3, 2056}};
  struct Types {
    DType x, w, out;
    bool gated;
  };
  const Types types[] = {{DType::kBF16, DType::kBF16, DType::kBF16, false},
                         {DType::kF32, DType::kBF16, DType::kBF16, false},
                         {DType::kBF16, DType::kBF16, DType::kF32, false},
                         {DType::kF16, DType::kF16, DType::kF16, false},
                         {DType::kF32, DType::kF16, DType::kF32, false},
                         {DType::kBF16, DType::kBF16, DType::kBF16, true},
                         {DType::kF16, DType::kF16, DType::kF32, true}};
  for (const Shape& s : shapes) {
    for (const Types& ty : types) {
      const std::string what =
          fmt::format("N={} K={} x {} w {} out {}{}", s.n, s.k, DTypeName(ty.x), DTypeName(ty.w),
                      DTypeName(ty.out), ty.gated ? " gated" : "");
      DeviceTensor x = Upload(*gpu_, RandomNormal(2 * s.k, 31, 1.5f), ty.x, {2, s.k});
      DeviceTensor up = Upload(*gpu_, RandomNormal(2 * s.k, 32), ty.x, {2, s.k});
      DeviceTensor w =
          Upload(*gpu_, RandomNormal(static_cast<size_t>(s.n) * s.k, 33, 1.0f / std::sqrt(s.k)),
                 ty.w, {s.n, s.k});
      kernels::GemvParams p;
      p.x = x.t.data;
      p.w = w.t.data;
      p.m = 1;
      p.n = s.n;
      p.k = s.k;
      p.ldx = s.k;
      p.ldo = s.n;
      p.x_type = ty.x;
      p.w_type = ty.w;
      p.out_type = ty.out;
      if (ty.gated) {
        p.up = up.t.data;
        p.ldu = s.k;
      }
      std::vector<float> first;
      for (int t = 0; t < kernels::kGemvTiles; ++t) {
        DeviceTensor out = Upload(*gpu_, std::vector<float>(s.n, NAN), ty.out, {1, s.n});
        p.out = out.t.data;
        p.tile = static_cast<kernels::GemvTile>(t);
        ASSERT_EQ(kernels::LaunchGemv(p, gpu_->stream()), cudaSuccess) << what << " tile " << t;
        const std::vector<float> got = Download(*gpu_, out.t);
        if (t == 0) {
          first = got;
          for (const float v : got) ASSERT_TRUE(std::isfinite(v)) << what;
          continue;
        }
        for (int i = 0; i < s.n; ++i) {
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(first[i]))
              << what << " tile " << t << " output " << i;
        }
      }
      // Above M = 1 only the four-row tile runs.
      p.m = 2;
      p.tile = kernels::GemvTile::k2RowsDeep;
      EXPECT_EQ(kernels::LaunchGemv(p, gpu_->stream()), cudaErrorInvalidValue) << what;
    }
  }
}

// GeluMulLinear: fused into the GEMV for M <= kGemvGatedMaxM where the GEMV is the layer's path,
// bit for bit what GeluTanhMul then Linear give (the product is rounded to the activation type
// before it is used, as GeluTanhMul stores it); unfused (act written) elsewhere. gate and up are
// the two halves of one [M, 2I] gate_up output, as in the MLP.
TEST_F(CudaOpsTest, GeluMulLinearFusesIntoTheGemvBitForBit) {
  const int inter = 704, n = 520;
  for (const DType t : {DType::kBF16, DType::kF16}) {
    for (const int m : {1, 2, 3}) {
      for (const bool out_f32 : {false, true}) {
        const std::string what =
            fmt::format("{} M={} out {}", DTypeName(t), m, out_f32 ? "f32" : "act");
        std::vector<float> gu = RandomNormal(static_cast<size_t>(m) * 2 * inter, 21, 1.5f);
        std::vector<float> w =
            RandomNormal(static_cast<size_t>(n) * inter, 22, 1.0f / std::sqrt(inter));
        DeviceTensor dgu = Upload(*gpu_, gu, t, {m, 2 * inter});
        DeviceTensor dw = Upload(*gpu_, w, t, {n, inter});
        const DType ot = out_f32 ? DType::kF32 : t;
        DeviceTensor act = Upload(*gpu_, std::vector<float>(m * inter, NAN), t, {m, inter});
        DeviceTensor fused = Upload(*gpu_, std::vector<float>(m * n, NAN), ot, {m, n});
        DeviceTensor apart = Upload(*gpu_, std::vector<float>(m * n, NAN), ot, {m, n});
        const Tensor gate = dgu.t.Cols(0, inter), up = dgu.t.Cols(inter, inter);
        gpu_->linear().Force(backend::CudaLinear::Path::kGemv);
        // Unfused first: it tunes act's shape, which the fused call then follows.
        ASSERT_TRUE(gpu_->GeluTanhMul(gate, up, act.t).ok()) << what;
        ASSERT_TRUE(gpu_->Linear(act.t, dw.t, apart.t).ok()) << what;
        const std::vector<float> act_apart = Download(*gpu_, act.t);
        ASSERT_TRUE(gpu_->Fill(act.t, NAN).ok());
        ASSERT_TRUE(gpu_->GeluMulLinear(gate, up, dw.t, act.t, fused.t).ok()) << what;
        const std::vector<float> got = Download(*gpu_, fused.t), want = Download(*gpu_, apart.t);
        const std::vector<float> act_after = Download(*gpu_, act.t);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], want[i]) << what << " element " << i;
        // Fused exactly where it should be: then the product never reaches memory.
        const bool fused_ran = std::isnan(act_after[0]);
        EXPECT_EQ(fused_ran, m <= kernels::kGemvGatedMaxM) << what;
        if (!fused_ran) {
          EXPECT_EQ(act_after, act_apart) << what;
        }
        // And against the CPU: gelu(gate) * up rounded to the activation type, then the layer.
        std::vector<float> ref(m * n), actq = act_apart;
        std::vector<float> wq = Download(*gpu_, dw.t);  // the weights as the GPU holds them
        ASSERT_TRUE(
            cpu_.Linear(Host(actq, {m, inter}), Host(wq, {n, inter}), Host(ref, {m, n})).ok());
        EXPECT_LE(RelL2(got, ref), out_f32 ? kF32Tol * 10 : kBf16Tol) << what;
      }
    }
  }
  gpu_->linear().Force(std::nullopt);
}

// The GEMV's GeLU-mul epilogue (kernels::GemvParams::glu): out = GeluTanhMul of the gate and up
// halves of a stacked [2I, K] weight's projection, bit for bit the GEMV into [M, 2I] then
// GeluTanhMul, for every M bucket, every tile of two or more rows at M = 1, odd and tiny I (a
// last CTA with one pair); the one-row tile, an f32 output, a gated input or n != 2 glu refused.
TEST_F(CudaOpsTest, GemvGluGivesTheBitsOfTheGemvThenGeluTanhMul) {
  struct Shape {
    int inter, k;
  };
  const Shape shapes[] = {{1536, 1536}, {1537, 520}, {3, 40}, {641, 2056}};
  for (const Shape& s : shapes) {
    for (const DType t : {DType::kBF16, DType::kF16}) {
      const int n = 2 * s.inter;
      DeviceTensor x = Upload(*gpu_, RandomNormal(8 * s.k, 51, 1.5f), t, {8, s.k});
      DeviceTensor w =
          Upload(*gpu_, RandomNormal(static_cast<size_t>(n) * s.k, 52, 2.0f / std::sqrt(s.k)), t,
                 {n, s.k});
      for (const int m : {1, 2, 3, 5, 8}) {
        kernels::GemvParams p;
        p.x = x.t.data;
        p.w = w.t.data;
        p.m = m;
        p.n = n;
        p.k = s.k;
        p.ldx = s.k;
        p.x_type = p.w_type = p.out_type = t;
        // The reference: the projection into [M, 2I], then GeluTanhMul of its halves.
        DeviceTensor gu = Upload(*gpu_, std::vector<float>(m * n, NAN), t, {m, n});
        DeviceTensor want = Upload(*gpu_, std::vector<float>(m * s.inter, NAN), t, {m, s.inter});
        p.out = gu.t.data;
        p.ldo = n;
        ASSERT_EQ(kernels::LaunchGemv(p, gpu_->stream()), cudaSuccess);
        ASSERT_TRUE(
            gpu_->GeluTanhMul(gu.t.Cols(0, s.inter), gu.t.Cols(s.inter, s.inter), want.t).ok());
        const std::vector<float> ref = Download(*gpu_, want.t);
        for (int tile = 0; tile < kernels::kGemvTiles; ++tile) {
          const auto gt = static_cast<kernels::GemvTile>(tile);
          if (!kernels::GemvTileRuns(gt, m)) continue;
          const std::string what =
              fmt::format("I={} K={} {} M={} tile {}", s.inter, s.k, DTypeName(t), m, tile);
          DeviceTensor act = Upload(*gpu_, std::vector<float>(m * s.inter, NAN), t, {m, s.inter});
          kernels::GemvParams g = p;
          g.glu = s.inter;
          g.out = act.t.data;
          g.ldo = s.inter;
          g.tile = gt;
          if (gt == kernels::GemvTile::k1RowDeep) {
            EXPECT_EQ(kernels::LaunchGemv(g, gpu_->stream()), cudaErrorInvalidValue) << what;
            continue;
          }
          ASSERT_EQ(kernels::LaunchGemv(g, gpu_->stream()), cudaSuccess) << what;
          const std::vector<float> got = Download(*gpu_, act.t);
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(ref[i]))
                << what << " element " << i;
          }
        }
        kernels::GemvParams bad = p;
        bad.glu = s.inter;
        bad.out = gu.t.data;
        bad.out_type = DType::kF32;
        EXPECT_EQ(kernels::LaunchGemv(bad, gpu_->stream()), cudaErrorInvalidValue);
        bad.out_type = p.out_type;
        bad.n = n - 2;
        EXPECT_EQ(kernels::LaunchGemv(bad, gpu_->stream()), cudaErrorInvalidValue);
        bad.n = n;
        bad.up = x.t.data;
        bad.ldu = s.k;
        EXPECT_EQ(kernels::LaunchGemv(bad, gpu_->stream()), cudaErrorInvalidValue);
      }
    }
  }
}

// LinearGeluMul: fused into the gate/up projection's GEMV for M <= kGemvMaxM where the GEMV is
// its path (gu then never written), bit for bit Linear then GeluTanhMul; unfused (gu written)
// on cuBLASLt and above M = 8; against the CPU's two ops within bf16 rounding.
TEST_F(CudaOpsTest, LinearGeluMulFusesIntoTheGemvBitForBit) {
  const int inter = 704, k = 520;
  for (const DType t : {DType::kBF16, DType::kF16}) {
    for (const int m : {1, 2, 8, 9}) {
      for (const auto path :
           {backend::CudaLinear::Path::kGemv, backend::CudaLinear::Path::kCublasLt}) {
        const bool gemv = path == backend::CudaLinear::Path::kGemv;
        const std::string what =
            fmt::format("{} M={} {}", DTypeName(t), m, gemv ? "gemv" : "cublasLt");
        std::vector<float> x = RandomNormal(static_cast<size_t>(m) * k, 61, 1.5f);
        std::vector<float> w =
            RandomNormal(static_cast<size_t>(2 * inter) * k, 62, 2.0f / std::sqrt(k));
        DeviceTensor dx = Upload(*gpu_, x, t, {m, k});
        DeviceTensor dw = Upload(*gpu_, w, t, {2 * inter, k});
        DeviceTensor gu = Upload(*gpu_, std::vector<float>(m * 2 * inter, NAN), t, {m, 2 * inter});
        DeviceTensor act = Upload(*gpu_, std::vector<float>(m * inter, NAN), t, {m, inter});
        DeviceTensor apart = Upload(*gpu_, std::vector<float>(m * inter, NAN), t, {m, inter});
        gpu_->linear().Force(path);
        // Unfused first: it tunes gu's shape, which the fused call then follows.
        ASSERT_TRUE(gpu_->Linear(dx.t, dw.t, gu.t).ok()) << what;
        ASSERT_TRUE(gpu_->GeluTanhMul(gu.t.Cols(0, inter), gu.t.Cols(inter, inter), apart.t).ok());
        const std::vector<float> gu_apart = Download(*gpu_, gu.t);
        ASSERT_TRUE(gpu_->Fill(gu.t, NAN).ok());
        ASSERT_TRUE(gpu_->LinearGeluMul(dx.t, dw.t, gu.t, act.t).ok()) << what;
        const std::vector<float> got = Download(*gpu_, act.t), want = Download(*gpu_, apart.t);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
              << what << " element " << i;
        const std::vector<float> gu_after = Download(*gpu_, gu.t);
        const bool fused_ran = std::isnan(gu_after[0]);
        EXPECT_EQ(fused_ran, gemv && m <= kernels::kGemvMaxM) << what;
        if (!fused_ran) {
          EXPECT_EQ(gu_after, gu_apart) << what;
        }
        // Against the CPU: the projection, rounded to the activation type, then GeluTanhMul.
        std::vector<float> xq = Download(*gpu_, dx.t), wq = Download(*gpu_, dw.t);
        std::vector<float> hgu(m * 2 * inter), ref(m * inter);
        Tensor h = Host(hgu, {m, 2 * inter});
        ASSERT_TRUE(cpu_.Linear(Host(xq, {m, k}), Host(wq, {2 * inter, k}), h).ok());
        ASSERT_TRUE(
            cpu_.GeluTanhMul(h.Cols(0, inter), h.Cols(inter, inter), Host(ref, {m, inter})).ok());
        EXPECT_LE(RelL2(got, ref), kBf16Tol * 2) << what;
      }
    }
  }
  gpu_->linear().Force(std::nullopt);
}

TEST_F(CudaOpsTest, GeluMulAddSoftcapGatherFill) {
  // 704 columns take the 16-byte bf16 kernel, 700 the element-wise one.
  for (const int width : {704, 700}) {
    const int rows = 7;
    std::vector<float> gate = RandomNormal(rows * 2 * width, 8, 2.0f), ref(rows * width);
    Tensor hg = Host(gate, {rows, 2 * width});
    ASSERT_TRUE(
        cpu_.GeluTanhMul(hg.Cols(0, width), hg.Cols(width, width), Host(ref, {rows, width})).ok());
    DeviceTensor dg = Upload(*gpu_, gate, DType::kBF16, {rows, 2 * width});
    DeviceTensor dout =
        Upload(*gpu_, std::vector<float>(rows * width), DType::kBF16, {rows, width});
    ASSERT_TRUE(gpu_->GeluTanhMul(dg.t.Cols(0, width), dg.t.Cols(width, width), dout.t).ok());
    EXPECT_LE(RelL2(Download(*gpu_, dout.t), ref), kBf16Tol) << width;
  }
  const int t = 7, n = 704;
  DeviceTensor dout = Upload(*gpu_, std::vector<float>(t * n), DType::kBF16, {t, n});

  std::vector<float> a = RandomNormal(t * n, 9), b = RandomNormal(t * n, 10), sum(t * n);
  ASSERT_TRUE(cpu_.Add(Host(a, {t, n}), Host(b, {t, n}), Host(sum, {t, n})).ok());
  DeviceTensor da = Upload(*gpu_, a, DType::kBF16, {t, n}),
               db = Upload(*gpu_, b, DType::kBF16, {t, n});
  ASSERT_TRUE(gpu_->Add(da.t, db.t, dout.t).ok());
  EXPECT_LE(RelL2(Download(*gpu_, dout.t), sum), kBf16Tol);

  std::vector<float> logits = RandomNormal(3 * 262144, 11, 40.0f, false), capped = logits;
  ASSERT_TRUE(cpu_.Softcap(Host(capped, {3, 262144}), 30.0f).ok());
  DeviceTensor dl = Upload(*gpu_, logits, DType::kF32, {3, 262144});
  ASSERT_TRUE(gpu_->Softcap(dl.t, 30.0f).ok());
  EXPECT_LE(RelL2(Download(*gpu_, dl.t), capped), kF32Tol);

  std::vector<int32_t> rows = {4, 0, 6, 6};
  DeviceTensor dr = UploadI32(*gpu_, rows, {4});
  DeviceTensor dgat = Upload(*gpu_, std::vector<float>(4 * n), DType::kBF16, {4, n});
  ASSERT_TRUE(gpu_->GatherRows(da.t, dr.t, dgat.t).ok());
  std::vector<float> got = Download(*gpu_, dgat.t), all = Download(*gpu_, da.t);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(
        std::equal(got.begin() + i * n, got.begin() + (i + 1) * n, all.begin() + rows[i] * n));
  }

  ASSERT_TRUE(gpu_->Fill(dgat.t, 2.5f).ok());
  for (float v : Download(*gpu_, dgat.t)) ASSERT_EQ(v, 2.5f);
  DeviceTensor di = UploadI32(*gpu_, std::vector<int32_t>(5, 0), {5});
  ASSERT_TRUE(gpu_->Fill(di.t, -1.0f).ok());
  for (float v : Download(*gpu_, di.t)) ASSERT_EQ(v, -1.0f);
}

TEST_F(CudaOpsTest, PleCombine) {
  const int t = 5, layers = 42, p = 256;
  std::vector<float> proj = RandomNormal(t * layers * p, 12, 4.0f),
                     tok = RandomNormal(t * layers * p, 13);
  std::vector<float> w = RandomNormal(p, 14, 0.2f), ref(t * layers * p);
  for (float& v : w) v += 1.f;
  ASSERT_TRUE(cpu_.PleCombine(Host(proj, {t, layers * p}), Host(tok, {t, layers * p}), Host(w, {p}),
                              0.02f, 0.70710677f, 1e-6f, Host(ref, {t, layers * p}))
                  .ok());
  DeviceTensor dp = Upload(*gpu_, proj, DType::kBF16, {t, layers * p});
  DeviceTensor dt = Upload(*gpu_, tok, DType::kBF16, {t, layers * p});
  DeviceTensor dw = Upload(*gpu_, w, DType::kF32, {p});
  DeviceTensor dout =
      Upload(*gpu_, std::vector<float>(t * layers * p), DType::kBF16, {t, layers * p});
  ASSERT_TRUE(gpu_->PleCombine(dp.t, dt.t, dw.t, 0.02f, 0.70710677f, 1e-6f, dout.t).ok());
  EXPECT_LE(RelL2(Download(*gpu_, dout.t), ref), kBf16Tol);
}

// q/k norms, both RoPE kinds, v norm and the paged KV write, incl. k_eq_v, skipped slots and a
// KV-shared layer (q only).
// The six-token step both QkvPrep tests run: positions far apart (RoPE at large angles), one token
// whose KV write is skipped (slot -1), host and device metadata.
struct QkvPrepStep {
  static constexpr int kTokens = 6;
  std::vector<int32_t> pos = {0, 1, 2, 9000, 70000, 131071};
  std::vector<int32_t> slots = {3, 17, -1, 40, 127, 64};
  DeviceTensor dpos, dslots;
  backend::StepMetadata meta;
  QkvPrepStep(backend::Backend& gpu, int page, int pages)
      : dpos(UploadI32(gpu, pos, {kTokens})), dslots(UploadI32(gpu, slots, {kTokens})) {
    meta.num_seqs = 1;
    meta.num_tokens = kTokens;
    meta.host_positions = pos.data();
    meta.positions = dpos.t.as<int32_t>();
    meta.groups[0].page_size = page;
    meta.groups[0].num_pages = pages;
    meta.groups[0].host_slot_mapping = slots.data();
    meta.groups[0].slot_mapping = dslots.t.as<int32_t>();
  }
  QkvPrepStep(const QkvPrepStep&) = delete;  // meta points into the members
  QkvPrepStep& operator=(const QkvPrepStep&) = delete;
};

TEST_F(CudaOpsTest, QkvPrep) {
  struct Layer {
    int nq, nkv, d;
    bool k_eq_v, has_kv;
    backend::RopeSpec rope;
  };
  const Layer layers[] = {{32, 16, 256, false, true, {10000.0, 128, 1.0}},
                          {32, 4, 512, true, true, {1e6, 64, 1.0}},
                          {8, 2, 512, false, false, {1e6, 64, 1.0}}};
  for (const Layer& L : layers) {
    const int t = QkvPrepStep::kTokens, page = 16, pages = 8;
    const int cols = (L.nq + (L.has_kv ? L.nkv * (L.k_eq_v ? 1 : 2) : 0)) * L.d;
    std::vector<float> qkv = RandomNormal(t * cols, 15, 2.0f);
    std::vector<float> qn = RandomNormal(L.d, 16, 0.1f), kn = RandomNormal(L.d, 17, 0.1f);
    for (float& v : qn) v += 0.25f;
    for (float& v : kn) v += 0.25f;
    QkvPrepStep step(*gpu_, page, pages);
    backend::StepMetadata& meta = step.meta;
    const size_t cache = static_cast<size_t>(pages) * L.nkv * page * L.d;
    std::vector<float> qref(t * L.nq * L.d), kref(cache, 0.f), vref(cache, 0.f);
    backend::QkvPrepArgs a;
    a.num_q_heads = L.nq;
    a.num_kv_heads = L.nkv;
    a.head_dim = L.d;
    a.has_kv = L.has_kv;
    a.k_eq_v = L.k_eq_v;
    a.rope = L.rope;
    a.meta = &meta;
    {
      backend::QkvPrepArgs c = a;
      c.qkv = Host(qkv, {t, cols});
      c.q_norm = Host(qn, {L.d});
      c.k_norm = Host(kn, {L.d});
      c.q_out = Host(qref, {t, L.nq, L.d});
      c.kv.k = Host(kref, {pages, L.nkv, page, L.d});
      c.kv.v = Host(vref, {pages, L.nkv, page, L.d});
      ASSERT_TRUE(cpu_.QkvPrep(c).ok());
    }
    DeviceTensor dqkv = Upload(*gpu_, qkv, DType::kBF16, {t, cols});
    DeviceTensor dqn = Upload(*gpu_, qn, DType::kF32, {L.d}),
                 dkn = Upload(*gpu_, kn, DType::kF32, {L.d});
    DeviceTensor dq =
        Upload(*gpu_, std::vector<float>(t * L.nq * L.d), DType::kBF16, {t, L.nq, L.d});
    DeviceTensor dk =
        Upload(*gpu_, std::vector<float>(cache), DType::kBF16, {pages, L.nkv, page, L.d});
    DeviceTensor dv =
        Upload(*gpu_, std::vector<float>(cache), DType::kBF16, {pages, L.nkv, page, L.d});
    a.qkv = dqkv.t;
    a.q_norm = dqn.t;
    a.k_norm = dkn.t;
    a.q_out = dq.t;
    a.kv.k = dk.t;
    a.kv.v = dv.t;
    ASSERT_TRUE(gpu_->QkvPrep(a).ok());
    EXPECT_LE(RelL2(Download(*gpu_, dq.t), qref), kBf16Tol) << "q d=" << L.d;
    EXPECT_LE(RelL2(Download(*gpu_, dk.t), kref), kBf16Tol) << "k d=" << L.d;
    EXPECT_LE(RelL2(Download(*gpu_, dv.t), vref), kBf16Tol) << "v d=" << L.d;
  }
}

// The FP8 cache write (backend.h's storage) against the CPU backend's: the same bytes and scales up
// to the last-bit differences of rsqrt / sin / cos, which may move a value across an FP8
// rounding boundary (one step, 2^-3 relative at most, on a few elements).
TEST_F(CudaOpsTest, QkvPrepWritesFp8Rows) {
  struct Layer {
    int nkv, d;
    bool k_eq_v;
  };
  for (const Layer& L : {Layer{16, 256, false}, Layer{4, 512, true}}) {
    const int nq = 8, t = QkvPrepStep::kTokens, page = 16, pages = 8;
    const int cols = (nq + L.nkv * (L.k_eq_v ? 1 : 2)) * L.d;
    std::vector<float> qkv = RandomNormal(t * cols, 25, 2.0f);
    // An outlier token-head (x 60) and an all-zero head: each row keeps its own scale.
    for (int i = 0; i < L.d; ++i) {
      float& outlier = qkv[1 * cols + nq * L.d + i];
      outlier = RoundToBf16(outlier * 60.f);  // the GPU reads bf16: both sides see the same values
      qkv[3 * cols + nq * L.d + L.d + i] = 0.f;
    }
    std::vector<float> qn(L.d, 1.0f), kn = RandomNormal(L.d, 27, 0.1f);
    for (float& v : kn) v += 1.0f;
    QkvPrepStep step(*gpu_, page, pages);
    backend::StepMetadata& meta = step.meta;
    const size_t rows = static_cast<size_t>(pages) * L.nkv * page, cache = rows * L.d;
    std::vector<float> qref(t * nq * L.d), ks(rows, 0.f), vs(rows, 0.f);
    std::vector<uint8_t> k8(cache, 0), v8(cache, 0);
    backend::QkvPrepArgs a;
    a.num_q_heads = nq;
    a.num_kv_heads = L.nkv;
    a.head_dim = L.d;
    a.k_eq_v = L.k_eq_v;
    a.rope = {1e6, L.d / 8, 1.0};
    a.meta = &meta;
    {
      backend::QkvPrepArgs c = a;
      c.qkv = Host(qkv, {t, cols});
      c.q_norm = Host(qn, {L.d});
      c.k_norm = Host(kn, {L.d});
      c.q_out = Host(qref, {t, nq, L.d});
      c.kv.k = Tensor::Make(k8.data(), DType::kF8E4M3, {pages, L.nkv, page, L.d});
      c.kv.v = Tensor::Make(v8.data(), DType::kF8E4M3, {pages, L.nkv, page, L.d});
      c.kv.k_scale = Host(ks, {pages, L.nkv, page});
      c.kv.v_scale = Host(vs, {pages, L.nkv, page});
      ASSERT_TRUE(cpu_.QkvPrep(c).ok());
    }
    DeviceTensor dqkv = Upload(*gpu_, qkv, DType::kBF16, {t, cols});
    DeviceTensor dqn = Upload(*gpu_, qn, DType::kF32, {L.d}),
                 dkn = Upload(*gpu_, kn, DType::kF32, {L.d});
    DeviceTensor dq = Upload(*gpu_, std::vector<float>(t * nq * L.d), DType::kBF16, {t, nq, L.d});
    DeviceTensor dk = testing::UploadBytes(*gpu_, std::vector<uint8_t>(cache), DType::kF8E4M3,
                                           {pages, L.nkv, page, L.d});
    DeviceTensor dv = testing::UploadBytes(*gpu_, std::vector<uint8_t>(cache), DType::kF8E4M3,
                                           {pages, L.nkv, page, L.d});
    DeviceTensor dks = Upload(*gpu_, std::vector<float>(rows), DType::kF32, {pages, L.nkv, page});
    DeviceTensor dvs = Upload(*gpu_, std::vector<float>(rows), DType::kF32, {pages, L.nkv, page});
    a.qkv = dqkv.t;
    a.q_norm = dqn.t;
    a.k_norm = dkn.t;
    a.q_out = dq.t;
    a.kv.k = dk.t;
    a.kv.v = dv.t;
    a.kv.k_scale = dks.t;
    a.kv.v_scale = dvs.t;
    ASSERT_TRUE(gpu_->QkvPrep(a).ok());
    struct Array {
      const char* name;
      const DeviceTensor& bytes;
      const DeviceTensor& scales;
      const std::vector<uint8_t>& ref_bytes;
      const std::vector<float>& ref_scales;
    };
    for (const Array& arr : {Array{"k", dk, dks, k8, ks}, Array{"v", dv, dvs, v8, vs}}) {
      std::vector<uint8_t> got(cache);
      ASSERT_TRUE(gpu_->CopyToHost(got.data(), arr.bytes.t.data, cache).ok());
      const std::vector<float> got_s = Download(*gpu_, arr.scales.t);
      size_t same = 0, zero_rows = 0;
      for (size_t i = 0; i < cache; ++i) same += got[i] == arr.ref_bytes[i];
      for (size_t r = 0; r < rows; ++r) {
        EXPECT_NEAR(got_s[r], arr.ref_scales[r], 1e-5 * std::fabs(arr.ref_scales[r]) + 1e-30)
            << arr.name << " row " << r;
        zero_rows += arr.ref_scales[r] == 0.f;
      }
      EXPECT_GE(same, cache - cache / 200) << arr.name << " d=" << L.d;  // >= 99.5% bit-equal
      const std::vector<float> deq = testing::DequantizeFp8Rows({got, got_s}, L.d);
      const std::vector<float> ref =
          testing::DequantizeFp8Rows({arr.ref_bytes, arr.ref_scales}, L.d);
      EXPECT_LE(RelL2(deq, ref), 1e-2) << arr.name << " d=" << L.d;
      EXPECT_GT(zero_rows, 0u);  // untouched rows and the zero head keep scale 0
    }
  }
}

TEST_F(CudaOpsTest, MoeRouteAndEveryExpertsEntry) {
  struct Moe {
    int h, inter, experts, top_k;
    std::vector<int> tokens;
    bool twin_rows = false;  // odd experts' router rows copy the even ones': exact logit ties
  };
  const Moe shapes[] = {{2816, 704, 128, 8, {1, 3, 64, 200}},
                        {40, 32, 8, 2, {1, 5, 33}},
                        {64, 32, 128, 8, {1, 3, 9}, true}};
  for (const Moe& s : shapes) {
    std::vector<float> scale = RandomNormal(s.h, 20, 0.2f), per = RandomNormal(s.experts, 21, 0.2f);
    for (float& v : scale) v += 1.f;
    for (float& v : per) v += 1.f;
    std::vector<float> router =
        RandomNormal(static_cast<size_t>(s.experts) * s.h, 22, 1.f / std::sqrt(s.h));
    if (s.twin_rows) {
      // Every pick is then a tie, which both sides must break to the lower expert index.
      for (int e = 1; e < s.experts; e += 2) {
        std::copy_n(router.begin() + static_cast<size_t>(e - 1) * s.h, s.h,
                    router.begin() + static_cast<size_t>(e) * s.h);
      }
    }
    std::vector<float> gu =
        RandomNormal(static_cast<size_t>(s.experts) * 2 * s.inter * s.h, 23, 1.f / std::sqrt(s.h));
    std::vector<float> dn =
        RandomNormal(static_cast<size_t>(s.experts) * s.h * s.inter, 24, 1.f / std::sqrt(s.inter));
    auto bf = [](const std::vector<float>& v) {
      std::vector<uint16_t> b(v.size());
      for (size_t i = 0; i < v.size(); ++i) b[i] = FloatToBf16(v[i]);
      return b;
    };
    std::vector<uint16_t> router_b = bf(router), gu_b = bf(gu), dn_b = bf(dn);
    DeviceTensor d_scale = Upload(*gpu_, scale, DType::kF32, {s.h}),
                 d_per = Upload(*gpu_, per, DType::kF32, {s.experts});
    DeviceTensor d_router = Upload(*gpu_, router, DType::kBF16, {s.experts, s.h});
    DeviceTensor d_gu = Upload(*gpu_, gu, DType::kBF16, {s.experts, 2 * s.inter, s.h});
    DeviceTensor d_dn = Upload(*gpu_, dn, DType::kBF16, {s.experts, s.h, s.inter});
    for (int t : s.tokens) {
      std::vector<float> x = RandomNormal(t * s.h, 25 + t, 2.f, false);
      std::vector<float> ids_ref(t * s.top_k), w_ref(t * s.top_k);
      std::vector<int32_t> ids_i(t * s.top_k);
      backend::MoeRouteArgs r;
      r.top_k = s.top_k;
      r.router_scale = Host(scale, {s.h});
      r.per_expert_scale = Host(per, {s.experts});
      r.router_proj = Tensor::Make(router_b.data(), DType::kBF16, {s.experts, s.h});
      r.x = Host(x, {t, s.h});
      r.topk_ids = Tensor::Make(ids_i.data(), DType::kI32, {t, s.top_k});
      r.topk_weights = Host(w_ref, {t, s.top_k});
      ASSERT_TRUE(cpu_.MoeRoute(r).ok());
      DeviceTensor dx = Upload(*gpu_, x, DType::kF32, {t, s.h});
      DeviceTensor dids = UploadI32(*gpu_, std::vector<int32_t>(t * s.top_k, -7), {t, s.top_k});
      DeviceTensor dw = Upload(*gpu_, std::vector<float>(t * s.top_k), DType::kF32, {t, s.top_k});
      backend::MoeRouteArgs g = r;
      g.router_scale = d_scale.t;
      g.per_expert_scale = d_per.t;
      g.router_proj = d_router.t;
      g.x = dx.t;
      g.topk_ids = dids.t;
      g.topk_weights = dw.t;
      ASSERT_TRUE(gpu_->MoeRoute(g).ok());
      std::vector<float> gids = Download(*gpu_, dids.t), gw = Download(*gpu_, dw.t);
      for (int i = 0; i < t * s.top_k; ++i) ids_ref[i] = static_cast<float>(ids_i[i]);
      // Random logits have no near-ties at this size (and twin rows exact ties, broken to the
      // lower index): the selections must agree exactly.
      EXPECT_EQ(gids, ids_ref) << "tokens " << t << (s.twin_rows ? ", twin rows" : "");
      if (s.twin_rows) {
        for (int i = 0; i < t * s.top_k; i += 2) {
          EXPECT_EQ(static_cast<int>(gids[i]) % 2, 0)
              << "a twin pair's first pick is its even expert";
          EXPECT_EQ(gids[i + 1], gids[i] + 1) << "and its odd twin follows";
        }
      }
      EXPECT_LE(RelL2(gw, w_ref), 1e-4) << "tokens " << t;

      // Experts on the CPU's routing, through every applicable registry entry.
      std::vector<float> z = RandomNormal(t * s.h, 40 + t), ref(t * s.h);
      backend::MoeExpertsArgs e;
      e.x = Host(z, {t, s.h});
      e.topk_ids = r.topk_ids;
      e.topk_weights = Host(w_ref, {t, s.top_k});
      e.gate_up = Tensor::Make(gu_b.data(), DType::kBF16, {s.experts, 2 * s.inter, s.h});
      e.down = Tensor::Make(dn_b.data(), DType::kBF16, {s.experts, s.h, s.inter});
      e.out = Host(ref, {t, s.h});
      ASSERT_TRUE(cpu_.MoeExperts(e).ok());
      DeviceTensor dz = Upload(*gpu_, z, DType::kBF16, {t, s.h});
      DeviceTensor dcids = UploadI32(*gpu_, ids_i, {t, s.top_k});
      DeviceTensor dcw = Upload(*gpu_, w_ref, DType::kF32, {t, s.top_k});
      DeviceTensor dout = Upload(*gpu_, std::vector<float>(t * s.h), DType::kBF16, {t, s.h});
      kernels::MoeExpertsParams p;
      p.x = dz.t.data;
      p.ldx = s.h;
      p.topk_ids = dcids.t.as<int32_t>();
      p.topk_weights = dcw.t.as<float>();
      p.gate_up = d_gu.t.data;
      p.down = d_dn.t.data;
      p.out = dout.t.data;
      p.ldo = s.h;
      p.num_tokens = t;
      p.hidden = s.h;
      p.inter = s.inter;
      p.num_experts = s.experts;
      p.top_k = s.top_k;
      // Every MoE entry on `params` (whatever its M limit) against `want`; returns how many ran.
      auto run_every_entry = [&](const kernels::MoeExpertsParams& params,
                                 const std::vector<float>& want, const std::string& what) {
        const kernels::ProblemKey pk = kernels::MoeExpertsProblem(params);
        int ran = 0;
        for (const kernels::KernelEntry* entry : kernels::AllEntries()) {
          if (entry->op != kernels::Op::kMoeExperts) continue;
          kernels::ProblemKey any = pk;
          any.num_tokens = std::min(pk.num_tokens, 1);
          if (!kernels::CheckEntry(*entry, any, gpu_->device_info()).ok) continue;
          auto ws =
              gpu_->Workspace(backend::CudaBackend::WorkspaceId::kMoeExperts,
                              std::max<size_t>(1, entry->workspace_bytes(pk, gpu_->device_info())));
          EXPECT_TRUE(ws.ok());
          if (!ws.ok()) return ran;
          EXPECT_TRUE(gpu_->Fill(dout.t, NAN).ok());
          EXPECT_EQ(entry->launch(&params, pk, gpu_->device_info(), *ws, gpu_->stream()),
                    cudaSuccess);
          EXPECT_LE(RelL2(Download(*gpu_, dout.t), want), kBf16Tol)
              << entry->name << what << ", tokens " << t;
          ++ran;
        }
        return ran;
      };
      const int ran = run_every_entry(p, ref, "");
      EXPECT_GE(ran, 1);
      // And the backend's own choice.
      backend::MoeExpertsArgs ge = e;
      ge.x = dz.t;
      ge.topk_ids = dcids.t;
      ge.topk_weights = dcw.t;
      ge.gate_up = d_gu.t;
      ge.down = d_dn.t;
      ge.out = dout.t;
      ASSERT_TRUE(gpu_->MoeExperts(ge).ok());
      EXPECT_LE(RelL2(Download(*gpu_, dout.t), ref), kBf16Tol) << "selected, tokens " << t;
      // The fp16 compute path: f16 x and weights (the bf16 values, exact in f16), f32 out.
      {
        DeviceTensor z16 = Upload(*gpu_, z, DType::kF16, {t, s.h});
        DeviceTensor gu16 = Upload(*gpu_, gu, DType::kF16, {s.experts, 2 * s.inter, s.h});
        DeviceTensor dn16 = Upload(*gpu_, dn, DType::kF16, {s.experts, s.h, s.inter});
        DeviceTensor out32 = Upload(*gpu_, std::vector<float>(t * s.h, NAN), DType::kF32, {t, s.h});
        backend::MoeExpertsArgs ge16 = ge;
        ge16.x = z16.t;
        ge16.gate_up = gu16.t;
        ge16.down = dn16.t;
        ge16.out = out32.t;
        ASSERT_TRUE(gpu_->MoeExperts(ge16).ok());
        EXPECT_LE(RelL2(Download(*gpu_, out32.t), ref), kBf16Tol) << "f16, tokens " << t;
        ge16.out = dout.t;  // bf16 out with f16 x: the two paths' pairs only
        EXPECT_FALSE(gpu_->MoeExperts(ge16).ok());
      }

      // Expert parallelism: rank 1 of 2 holds the second half of the experts; pairs routed to the
      // first half add nothing (tokens with none here get zero rows). Every entry, against the CPU.
      const int held = s.experts / 2;
      backend::MoeExpertsArgs half = e;
      half.gate_up = Tensor::Make(gu_b.data() + held * 2 * s.inter * s.h, DType::kBF16,
                                  {held, 2 * s.inter, s.h});
      half.down =
          Tensor::Make(dn_b.data() + held * s.h * s.inter, DType::kBF16, {held, s.h, s.inter});
      half.expert_begin = held;
      half.total_experts = s.experts;
      std::vector<float> ref_half(t * s.h);
      half.out = Host(ref_half, {t, s.h});
      ASSERT_TRUE(cpu_.MoeExperts(half).ok());
      kernels::MoeExpertsParams ph = p;
      ph.gate_up = static_cast<const uint16_t*>(d_gu.t.data) + held * 2 * s.inter * s.h;
      ph.down = static_cast<const uint16_t*>(d_dn.t.data) + held * s.h * s.inter;
      ph.num_experts = held;
      ph.expert_begin = held;
      EXPECT_GE(run_every_entry(ph, ref_half, " expert-parallel"), 1);
      // A range past the model's experts is refused by name.
      backend::MoeExpertsArgs bad = ge;
      bad.expert_begin = 1;
      bad.total_experts = s.experts;
      const absl::Status st = gpu_->MoeExperts(bad);
      EXPECT_NE(st.message().find("total_experts"), std::string::npos) << st;
    }
  }
}

// GPU synthetic weights equal the host generator bit for bit (matrices, vectors, every init).
TEST_F(CudaOpsTest, SyntheticWeightsMatchHostGenerator) {
  struct W {
    const char* name;
    model::WeightInit init;
    std::vector<int64_t> shape;
  };
  const W weights[] = {
      {"model.language_model.layers.3.self_attn.q_proj.weight",
       model::WeightInit::kMatrix,
       {1024, 5376}},
      {"model.language_model.embed_tokens.weight", model::WeightInit::kEmbedding, {4096, 2816}},
      {"model.language_model.layers.0.input_layernorm.weight", model::WeightInit::kNorm, {5376}},
      {"model.language_model.layers.0.self_attn.q_norm.weight", model::WeightInit::kQkNorm, {512}},
      {"model.language_model.layers.7.layer_scalar", model::WeightInit::kLayerScalar, {1}},
      {"model.language_model.layers.1.router.per_expert_scale",
       model::WeightInit::kPositiveScale,
       {128}},
      {"model.language_model.layers.1.experts.down_proj",
       model::WeightInit::kMatrix,
       {4, 2816, 704}},
  };
  for (const W& w : weights) {
    model::WeightView v;
    v.name = w.name;
    v.shape = w.shape;
    v.synthetic = true;
    v.seed = 0x9a77e7;
    v.init = w.init;
    const model::WeightView* parts[] = {&v};
    auto loaded = gpu_->LoadWeight(parts);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    std::vector<uint16_t> host(v.numel());
    model::FillSyntheticBf16(v.name, v.init, v.shape.back(), v.seed, 0, v.numel(), host.data());
    std::vector<float> got = Download(*gpu_, loaded->tensor);
    ASSERT_EQ(got.size(), host.size());
    int64_t mismatches = 0;
    for (size_t i = 0; i < host.size(); ++i) mismatches += got[i] != Bf16ToFloat(host[i]);
    // Exact by construction (no FMA contraction); only an ulp difference between CUDA's and glibc's
    // double log/cos right at a float rounding boundary could flip one value (odds ~1e-9 each).
    EXPECT_LE(mismatches, static_cast<int64_t>(host.size() / 1000000)) << w.name;
    EXPECT_EQ(loaded->tensor.dtype, w.shape.size() <= 1 ? DType::kF32 : DType::kBF16);
  }
}

// Kernels start before their predecessor has finished (programmatic dependent launch on sm_90+,
// kernels::Launch): each must still see every earlier kernel's writes. A chain of in-place adds
// over a buffer of many waves, with a norm between them, comes out exact only if every kernel
// waited for the one before.
TEST_F(CudaOpsTest, DependentKernelChainSeesEveryEarlierWrite) {
  const int rows = 512, n = 8192, adds = 48;
  DeviceTensor x = Upload(*gpu_, std::vector<float>(rows * n, 0.0f), DType::kF32, {rows, n});
  DeviceTensor one = Upload(*gpu_, std::vector<float>(rows * n, 1.0f), DType::kF32, {rows, n});
  DeviceTensor normed = Upload(*gpu_, std::vector<float>(rows * n, 0.0f), DType::kF32, {rows, n});
  for (int i = 0; i < adds; ++i) {
    ASSERT_TRUE(gpu_->Add(x.t, one.t, x.t).ok());
    // RMS-normalising a constant positive row gives 1 (to an ulp): a reader of x mid-chain.
    ASSERT_TRUE(gpu_->RmsNorm(x.t, Tensor{}, 0.0f, normed.t).ok());
    ASSERT_TRUE(gpu_->Add(normed.t, x.t, x.t).ok());  // + 1 more, read from the norm's output
  }
  // A kernel that ran early would have missed at least one whole +1.
  const std::vector<float> got = Download(*gpu_, x.t);
  for (size_t i = 0; i < got.size(); i += 4099)
    ASSERT_NEAR(got[i], 2.0f * adds, 1e-3) << "element " << i;
  ASSERT_NEAR(got.back(), 2.0f * adds, 1e-3);
}

// Every op a decode step uses, captured into a CUDA graph after one eager warm-up (which sizes the
// workspaces and tunes the GEMMs) and replayed twice: capture must succeed (no allocation, sync or
// pageable copy inside an op) and the replays must reproduce the eager results bit for bit.
TEST_F(CudaOpsTest, DecodeStepOpsReplayFromACudaGraph) {
  const int h = 256, nq = 8, nkv = 2, d = 256, page = 16, vocab = 1000, experts = 8, top_k = 2,
            inter = 64;
  const std::vector<int32_t> lens = {300, 45};
  const int seqs = 2, pages_per_seq = 20, pages = seqs * pages_per_seq;
  const int qkv_cols = (nq + 2 * nkv) * d;
  // Step metadata: one decode token per sequence at position len - 1.
  std::vector<int32_t> qs = {0, 1, 2}, pos = {lens[0] - 1, lens[1] - 1}, tok_seq = {0, 1},
                       table(seqs * pages_per_seq);
  for (int i = 0; i < seqs * pages_per_seq; ++i) table[i] = (i * 7) % pages;  // shuffled, distinct
  std::vector<int32_t> slots = {table[pos[0] / page] * page + pos[0] % page,
                                table[pages_per_seq + pos[1] / page] * page + pos[1] % page};
  DeviceTensor dqs = UploadI32(*gpu_, qs, {3}), dlens = UploadI32(*gpu_, lens, {2}),
               dpos = UploadI32(*gpu_, pos, {2});
  DeviceTensor dts = UploadI32(*gpu_, tok_seq, {2}),
               dtab = UploadI32(*gpu_, table, {seqs * pages_per_seq});
  DeviceTensor dslots = UploadI32(*gpu_, slots, {2});
  backend::StepMetadata meta;
  meta.num_seqs = seqs;
  meta.num_tokens = 2;
  meta.max_query_len = 1;
  meta.max_seq_len = lens[0];
  meta.query_start = dqs.t.as<int32_t>();
  meta.seq_lens = dlens.t.as<int32_t>();
  meta.positions = dpos.t.as<int32_t>();
  meta.token_seq = dts.t.as<int32_t>();
  meta.host_query_start = qs.data();
  meta.host_seq_lens = lens.data();
  meta.host_positions = pos.data();
  backend::KvGroupView& g = meta.groups[0];
  g.page_size = page;
  g.num_pages = pages;
  g.max_pages_per_seq = pages_per_seq;
  g.page_table = dtab.t.as<int32_t>();
  g.slot_mapping = dslots.t.as<int32_t>();
  g.host_page_table = table.data();
  g.host_slot_mapping = slots.data();

  DeviceTensor x = Upload(*gpu_, RandomNormal(2 * h, 50, 3.f, false), DType::kF32, {2, h});
  DeviceTensor norm_w = Upload(*gpu_, RandomNormal(h, 51, 0.1f), DType::kF32, {h});
  DeviceTensor w_qkv =
      Upload(*gpu_, RandomNormal(qkv_cols * h, 52, 0.06f), DType::kBF16, {qkv_cols, h});
  DeviceTensor w_o = Upload(*gpu_, RandomNormal(h * nq * d, 53, 0.02f), DType::kBF16, {h, nq * d});
  DeviceTensor qn = Upload(*gpu_, RandomNormal(d, 54, 0.1f), DType::kF32, {d});
  DeviceTensor kc =
      Upload(*gpu_, RandomNormal(pages * nkv * page * d, 55), DType::kBF16, {pages, nkv, page, d});
  DeviceTensor vc =
      Upload(*gpu_, RandomNormal(pages * nkv * page * d, 56), DType::kBF16, {pages, nkv, page, d});
  DeviceTensor router =
      Upload(*gpu_, RandomNormal(experts * h, 57, 0.06f), DType::kBF16, {experts, h});
  DeviceTensor rscale = Upload(*gpu_, RandomNormal(h, 58, 0.1f), DType::kF32, {h});
  DeviceTensor per = Upload(*gpu_, RandomNormal(experts, 59, 0.1f), DType::kF32, {experts});
  DeviceTensor gu = Upload(*gpu_, RandomNormal(experts * 2 * inter * h, 60, 0.06f), DType::kBF16,
                           {experts, 2 * inter, h});
  DeviceTensor dn =
      Upload(*gpu_, RandomNormal(experts * h * inter, 61, 0.1f), DType::kBF16, {experts, h, inter});
  DeviceTensor head = Upload(*gpu_, RandomNormal(vocab * h, 62, 0.06f), DType::kBF16, {vocab, h});
  auto act = [&](std::initializer_list<int64_t> dims, DType dt = DType::kBF16) {
    int64_t n = 1;
    for (int64_t v : dims) n *= v;
    return Upload(*gpu_, std::vector<float>(n, 0.f), dt, dims);
  };
  DeviceTensor hb = act({2, h}), qkv = act({2, qkv_cols}), q = act({2, nq, d}),
               attn = act({2, nq, d});
  DeviceTensor o = act({2, h}), ids = act({2, top_k}, DType::kI32),
               wts = act({2, top_k}, DType::kF32);
  DeviceTensor moe = act({2, h}), logits = act({2, vocab}, DType::kF32),
               sampled = act({2}, DType::kI32);
  std::vector<sampling::DrawParams> sp(2);
  sp[0].temperature = 1.0f;  // row 0 samples, row 1 samples with filters
  sp[1].temperature = 0.8f, sp[1].top_k = 20, sp[1].seed = 99;
  auto spbuf = gpu_->Allocate(sizeof(sampling::DrawParams) * 2);
  ASSERT_TRUE(spbuf.ok());
  ASSERT_TRUE(gpu_->CopyToDevice(spbuf->data(), sp.data(), sizeof(sampling::DrawParams) * 2).ok());
  const Tensor params = spbuf->View(DType::kU8, {2, 24});

  auto step = [&]() -> absl::Status {
    GANNET_RETURN_IF_ERROR(gpu_->RmsNorm(x.t, norm_w.t, 1e-6f, hb.t));
    GANNET_RETURN_IF_ERROR(gpu_->Linear(hb.t, w_qkv.t, qkv.t));
    backend::QkvPrepArgs pa;
    pa.qkv = qkv.t;
    pa.num_q_heads = nq;
    pa.num_kv_heads = nkv;
    pa.head_dim = d;
    pa.q_norm = qn.t;
    pa.k_norm = qn.t;
    pa.rope = {10000.0, d / 2, 1.0};
    pa.q_out = q.t;
    pa.kv.k = kc.t;
    pa.kv.v = vc.t;
    pa.meta = &meta;
    GANNET_RETURN_IF_ERROR(gpu_->QkvPrep(pa));
    backend::AttentionArgs aa;
    aa.q = q.t;
    aa.kv.k = kc.t;
    aa.kv.v = vc.t;
    aa.out = attn.t;
    aa.num_q_heads = nq;
    aa.num_kv_heads = nkv;
    aa.head_dim = d;
    aa.window = 128;
    aa.scale = 0.0625f;
    aa.meta = &meta;
    GANNET_RETURN_IF_ERROR(gpu_->Attention(aa));
    GANNET_RETURN_IF_ERROR(gpu_->Linear(attn.t.Reshape({2, nq * d}), w_o.t, o.t));
    GANNET_RETURN_IF_ERROR(
        gpu_->PostNormResidual(o.t, norm_w.t, x.t, Tensor(), norm_w.t, hb.t, 1e-6f));
    backend::MoeRouteArgs ra;
    ra.x = x.t;
    ra.router_scale = rscale.t;
    ra.router_proj = router.t;
    ra.per_expert_scale = per.t;
    ra.top_k = top_k;
    ra.topk_ids = ids.t;
    ra.topk_weights = wts.t;
    GANNET_RETURN_IF_ERROR(gpu_->MoeRoute(ra));
    backend::MoeExpertsArgs ea;
    ea.x = hb.t;
    ea.topk_ids = ids.t;
    ea.topk_weights = wts.t;
    ea.gate_up = gu.t;
    ea.down = dn.t;
    ea.out = moe.t;
    GANNET_RETURN_IF_ERROR(gpu_->MoeExperts(ea));
    GANNET_RETURN_IF_ERROR(gpu_->Linear(moe.t, head.t, logits.t));
    GANNET_RETURN_IF_ERROR(gpu_->Softcap(logits.t, 30.f));
    return gpu_->Sample(logits.t, params, Tensor(), sampled.t);
  };
  // The step writes x (residual) and the KV slot; restore them before every run.
  const std::vector<float> x0 = Download(*gpu_, x.t), k0 = Download(*gpu_, kc.t),
                           v0 = Download(*gpu_, vc.t);
  auto reset = [&] {
    DeviceTensor nx = Upload(*gpu_, x0, DType::kF32, {2, h});
    DeviceTensor nk = Upload(*gpu_, k0, DType::kBF16, {pages, nkv, page, d});
    DeviceTensor nv = Upload(*gpu_, v0, DType::kBF16, {pages, nkv, page, d});
    ASSERT_EQ(
        cudaMemcpyAsync(x.t.data, nx.t.data, 2 * h * 4, cudaMemcpyDeviceToDevice, gpu_->stream()),
        cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(kc.t.data, nk.t.data, k0.size() * 2, cudaMemcpyDeviceToDevice,
                              gpu_->stream()),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(vc.t.data, nv.t.data, v0.size() * 2, cudaMemcpyDeviceToDevice,
                              gpu_->stream()),
              cudaSuccess);
    ASSERT_TRUE(gpu_->Synchronize().ok());
  };
  ASSERT_TRUE(step().ok());  // warm-up: workspaces, GEMM tuning
  reset();
  ASSERT_TRUE(step().ok());
  const std::vector<float> eager_logits = Download(*gpu_, logits.t),
                           eager_ids = Download(*gpu_, sampled.t);
  const std::vector<float> eager_x = Download(*gpu_, x.t);

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(gpu_->stream(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const absl::Status captured = step();
  ASSERT_EQ(cudaStreamEndCapture(gpu_->stream(), &graph), cudaSuccess);
  ASSERT_TRUE(captured.ok()) << captured;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    reset();
    ASSERT_EQ(cudaGraphLaunch(exec, gpu_->stream()), cudaSuccess);
    ASSERT_TRUE(gpu_->Synchronize().ok());
    EXPECT_EQ(Download(*gpu_, logits.t), eager_logits) << "replay " << replay;
    EXPECT_EQ(Download(*gpu_, sampled.t), eager_ids) << "replay " << replay;
    EXPECT_EQ(Download(*gpu_, x.t), eager_x) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// GPU sampling against the CPU definition on a real vocabulary: greedy identical, sampled ids
// identical for the same seeds (they can only differ where exp() rounds differently right at a
// boundary; the test allows 1 in 200), and reproducible run to run. Every other row bans tokens
// (its CPU arg-max among them, so a greedy row must change its answer) and must read -inf there.
TEST_F(CudaOpsTest, SampleMatchesCpuDefinition) {
  const int vocab = 262144, rows = 48;
  std::vector<float> logits = RandomNormal(static_cast<size_t>(rows) * vocab, 30, 3.0f, false);
  std::vector<sampling::DrawParams> params(rows);
  for (int r = 0; r < rows; ++r) {
    sampling::DrawParams& p = params[r];
    p.seed = 0x1234567ull * (r + 1);
    switch (r % 6) {
      case 0:
        p.temperature = 0.f;
        break;
      case 1:
        p.temperature = 1.0f;
        break;
      case 2:
        p.temperature = 0.7f, p.top_k = 64;
        break;
      case 3:
        p.temperature = 1.0f, p.top_k = 64, p.top_p = 0.95f;
        break;
      case 4:
        p.temperature = 1.3f, p.top_p = 0.5f, p.min_p = 0.05f;
        break;
      case 5:
        p.temperature = 0.9f, p.min_p = 0.2f;
        break;
    }
  }
  std::vector<int32_t> banned(static_cast<size_t>(rows) * backend::kSampleBanSlots, -1);
  for (int r = 1; r < rows; r += 2) {
    const float* row = logits.data() + static_cast<size_t>(r) * vocab;
    banned[r * backend::kSampleBanSlots] =
        static_cast<int32_t>(std::max_element(row, row + vocab) - row);
    banned[r * backend::kSampleBanSlots + 1] = 1;
    banned[r * backend::kSampleBanSlots + 2] = 106;
  }
  std::vector<int32_t> unbanned(rows);
  std::vector<float> host_logits = logits;
  ASSERT_TRUE(cpu_.Sample(Host(host_logits, {rows, vocab}),
                          Tensor::Make(params.data(), DType::kU8, {rows, 24}), Tensor(),
                          Tensor::Make(unbanned.data(), DType::kI32, {rows}))
                  .ok());
  std::vector<int32_t> ref(rows);
  ASSERT_TRUE(
      cpu_.Sample(Host(host_logits, {rows, vocab}),
                  Tensor::Make(params.data(), DType::kU8, {rows, 24}),
                  Tensor::Make(banned.data(), DType::kI32, {rows, backend::kSampleBanSlots}),
                  Tensor::Make(ref.data(), DType::kI32, {rows}))
          .ok());
  for (int r = 1; r < rows; r += 2) {
    if (params[r].temperature == 0.f) {
      EXPECT_NE(ref[r], unbanned[r]) << "banned arg-max, row " << r;
    }
  }
  DeviceTensor dl = Upload(*gpu_, logits, DType::kF32, {rows, vocab});
  auto pbuf = gpu_->Allocate(rows * sizeof(sampling::DrawParams));
  ASSERT_TRUE(pbuf.ok());
  ASSERT_TRUE(
      gpu_->CopyToDevice(pbuf->data(), params.data(), rows * sizeof(sampling::DrawParams)).ok());
  DeviceTensor dids = UploadI32(*gpu_, std::vector<int32_t>(rows, -1), {rows});
  const Tensor tp = pbuf->View(DType::kU8, {rows, 24});
  DeviceTensor dban = UploadI32(*gpu_, banned, {rows, backend::kSampleBanSlots});
  ASSERT_TRUE(gpu_->Sample(dl.t, tp, dban.t, dids.t).ok());
  std::vector<float> first = Download(*gpu_, dids.t);
  ASSERT_TRUE(gpu_->Sample(dl.t, tp, dban.t, dids.t).ok());
  EXPECT_EQ(Download(*gpu_, dids.t), first);  // deterministic given the seeds
  const std::vector<float> masked = Download(*gpu_, dl.t);
  for (size_t i = 0; i < banned.size(); ++i) {
    if (banned[i] < 0) continue;
    const size_t r = i / backend::kSampleBanSlots;
    EXPECT_EQ(masked[r * vocab + banned[i]], -INFINITY) << "row " << r << " token " << banned[i];
  }
  int differ = 0;
  for (int r = 0; r < rows; ++r) {
    if (params[r].temperature == 0.f) {
      EXPECT_EQ(first[r], ref[r]) << "greedy row " << r;
    }
    differ += first[r] != ref[r];
  }
  EXPECT_LE(differ, rows / 200);
}

}  // namespace
}  // namespace gannet
