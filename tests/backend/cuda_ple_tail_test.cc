// The PLE tail of E2B/E4B layers (Backend::PleTail) on the CUDA backend, whose decode rows run one
// cluster kernel (kernels/ple/ple_tail.cu) on sm_90+:
//  - the op against its separate ops (the Backend default, on the same GPU) at E2B's and E4B's
//    widths, rows 1-4 (the kernel) and 5 (the default, bit for bit), with and without the
//    feed-forward update, the layer scalar and the next norm; and against the f32 CPU backend;
//  - operands the kernel does not take run the separate ops, whose errors name what is wrong;
//  - E2B and E4B at full width (8 layers, a small vocabulary, synthetic weights) through
//    runner::ModelRunner, with the op fused and with it split into its ops: the same logits to
//    bf16 precision at batch 1 and 2 decode steps.
// Tolerances: the kernel rounds to bf16 where the ops round but sums in another order, so a bf16
// value may land one step (2^-8) apart; the residual (f32) agrees with the separate ops' to rel-L2
// 1e-3 and bf16 outputs to 1e-2, while a wrong row or weight gives errors of order 1. Against the
// f32 CPU the residual carries the bf16 rounding of both updates (about a third of its norm here):
// rel-L2 5e-3 (H200: up to 1.1e-3 on the separate ops and the kernel alike).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "kernels/ple/ple_tail.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/forwarding_backend.h"
#include "lib/model/variants.h"
#include "lib/model/weights.h"
#include "tests/backend/cuda_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

using backend::PleTailArgs;
using backend::Tensor;
using testing::DeviceTensor;
using testing::Download;
using testing::RandomNormal;
using testing::RelL2;
using testing::Upload;

constexpr int kP = 256;
constexpr double kResidualTol = 1e-3;
constexpr double kCpuResidualTol = 5e-3;
constexpr double kBf16Tol = 1e-2;

bool DeviceIsSm90OrNewer() {
  int device = 0, major = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         major >= 9;
}

// One case's operands, on the GPU and (f32) on the host.
struct Operands {
  int t, h;
  std::vector<float> x, ff, ffw, gate_w, ple, proj_w, pw, nw, scalar;
};

Operands MakeOperands(int t, int h, uint32_t seed) {
  Operands o;
  o.t = t;
  o.h = h;
  o.x = RandomNormal(t * h, seed, 3.0f, false);
  o.ff = RandomNormal(t * h, seed + 1, 2.0f);
  o.ffw = RandomNormal(h, seed + 2, 0.3f);
  o.gate_w = RandomNormal(static_cast<size_t>(kP) * h, seed + 3, 1.0f / std::sqrt(h));
  // The per-layer inputs of 3 layers; the op reads the middle one (a column view).
  o.ple = RandomNormal(static_cast<size_t>(t) * 3 * kP, seed + 4, 1.0f);
  o.proj_w = RandomNormal(static_cast<size_t>(h) * kP, seed + 5, 1.0f / std::sqrt(kP));
  o.pw = RandomNormal(h, seed + 6, 0.3f);
  o.nw = RandomNormal(h, seed + 7, 0.3f);
  for (float& v : o.pw) v += 1.0f;
  o.scalar = {0.75f};
  return o;
}

class CudaPleTailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GANNET_REQUIRE_GPU();
    auto b = backend::CudaBackend::Create(0);
    ASSERT_TRUE(b.ok()) << b.status();
    gpu_ = std::move(*b);
  }
  std::unique_ptr<backend::CudaBackend> gpu_;
  backend::CpuBackend cpu_;
};

// GPU tensors of one run: residual, next output and scratch are its own; weights are shared.
struct GpuRun {
  DeviceTensor x, next, gate, gated, proj;
};

TEST_F(CudaPleTailTest, MatchesTheSeparateOpsAndTheCpu) {
  if (!DeviceIsSm90OrNewer()) {
    std::printf("[ note ] pre-sm_90 device: PleTail runs its separate ops; comparing those\n");
  }
  double worst = 0;  // residual rel-L2, the op against its separate ops
  for (int h : {1536, 2560}) {
    for (int t : {1, 2, 3, 4, 5}) {
      const bool fused = t <= kernels::kPleTailMaxRows && DeviceIsSm90OrNewer();
      EXPECT_EQ(kernels::PleTailRuns(t, h, kP), fused) << "hidden " << h << " rows " << t;
      for (int variant = 0; variant < 3; ++variant) {
        // 0: everything; 1: no feed-forward update; 2: no scalar and no next norm.
        const bool with_ff = variant != 1, with_next = variant != 2;
        SCOPED_TRACE(fmt::format("hidden {} rows {} ff {} next {}", h, t, with_ff, with_next));
        Operands o = MakeOperands(t, h, 100 + 10 * t + variant);
        DeviceTensor ff = Upload(*gpu_, o.ff, DType::kBF16, {t, h});
        DeviceTensor ffw = Upload(*gpu_, o.ffw, DType::kF32, {h});
        DeviceTensor gw = Upload(*gpu_, o.gate_w, DType::kBF16, {kP, h});
        DeviceTensor ple = Upload(*gpu_, o.ple, DType::kBF16, {t, 3 * kP});
        DeviceTensor prw = Upload(*gpu_, o.proj_w, DType::kBF16, {h, kP});
        DeviceTensor pw = Upload(*gpu_, o.pw, DType::kF32, {h});
        DeviceTensor nw = Upload(*gpu_, o.nw, DType::kF32, {h});
        DeviceTensor sc = Upload(*gpu_, o.scalar, DType::kF32, {1});
        GpuRun run[2];  // [0] the op, [1] its separate ops
        for (GpuRun& r : run) {
          r.x = Upload(*gpu_, o.x, DType::kF32, {t, h});
          r.next = Upload(*gpu_, std::vector<float>(t * h), DType::kBF16, {t, h});
          r.gate = Upload(*gpu_, std::vector<float>(t * kP), DType::kBF16, {t, kP});
          r.gated = Upload(*gpu_, std::vector<float>(t * kP), DType::kBF16, {t, kP});
          r.proj = Upload(*gpu_, std::vector<float>(t * h), DType::kBF16, {t, h});
        }
        auto args = [&](GpuRun& r) {
          PleTailArgs a;
          a.x = r.x.t;
          if (with_ff) {
            a.ff_out = ff.t;
            a.ff_post_weight = ffw.t;
          }
          a.gate_w = gw.t;
          a.ple_input = ple.t.Cols(kP, kP);
          a.proj_w = prw.t;
          a.post_weight = pw.t;
          if (with_next) {
            a.scalar = sc.t;
            a.next_weight = nw.t;
            a.next_out = r.next.t;
          }
          a.gate = r.gate.t;
          a.gated = r.gated.t;
          a.proj = r.proj.t;
          return a;
        };
        ASSERT_TRUE(gpu_->PleTail(args(run[0])).ok());
        ASSERT_TRUE(gpu_->Backend::PleTail(args(run[1])).ok());
        const std::vector<float> x0 = Download(*gpu_, run[0].x.t), x1 = Download(*gpu_, run[1].x.t);
        const std::vector<float> n0 = Download(*gpu_, run[0].next.t),
                                 n1 = Download(*gpu_, run[1].next.t);
        if (!fused) {
          for (size_t i = 0; i < x0.size(); ++i) {
            ASSERT_EQ(std::bit_cast<uint32_t>(x0[i]), std::bit_cast<uint32_t>(x1[i])) << i;
            ASSERT_EQ(std::bit_cast<uint32_t>(n0[i]), std::bit_cast<uint32_t>(n1[i])) << i;
          }
        }
        EXPECT_LE(RelL2(x0, x1), kResidualTol);
        worst = std::max(worst, RelL2(x0, x1));
        if (with_next) {
          EXPECT_LE(RelL2(n0, n1), kBf16Tol);
        }
        // The f32 CPU backend (no bf16 rounding between the ops; bf16 weights).
        std::vector<uint16_t> gwb(o.gate_w.size()), prwb(o.proj_w.size());
        for (size_t i = 0; i < gwb.size(); ++i) gwb[i] = FloatToBf16(o.gate_w[i]);
        for (size_t i = 0; i < prwb.size(); ++i) prwb[i] = FloatToBf16(o.proj_w[i]);
        std::vector<float> hx = o.x, hnext(t * h), hg(t * kP), hgated(t * kP), hproj(t * h);
        auto host = [](std::vector<float>& v, std::initializer_list<int64_t> dims) {
          return Tensor::Make(v.data(), DType::kF32, dims);
        };
        PleTailArgs c;
        c.x = host(hx, {t, h});
        if (with_ff) {
          c.ff_out = host(o.ff, {t, h});
          c.ff_post_weight = host(o.ffw, {h});
        }
        c.gate_w = Tensor::Make(gwb.data(), DType::kBF16, {kP, h});
        c.ple_input = host(o.ple, {t, 3 * kP}).Cols(kP, kP);
        c.proj_w = Tensor::Make(prwb.data(), DType::kBF16, {h, kP});
        c.post_weight = host(o.pw, {h});
        if (with_next) {
          c.scalar = host(o.scalar, {1});
          c.next_weight = host(o.nw, {h});
          c.next_out = host(hnext, {t, h});
        }
        c.gate = host(hg, {t, kP});
        c.gated = host(hgated, {t, kP});
        c.proj = host(hproj, {t, h});
        ASSERT_TRUE(cpu_.PleTail(c).ok());
        EXPECT_LE(RelL2(x0, hx), kCpuResidualTol);
        if (with_next) {
          EXPECT_LE(RelL2(n0, hnext), kBf16Tol);
        }
      }
    }
  }
  std::printf("[ note ] the op against its separate ops: residual rel-L2 at most %.2e\n", worst);
}

// Operands the kernel does not take go to the separate ops, whose checks name the bad operand;
// nothing is launched on a wrong shape.
TEST_F(CudaPleTailTest, BadOperandsAreNamed) {
  const int t = 1, h = 1536;
  Operands o = MakeOperands(t, h, 7);
  DeviceTensor x = Upload(*gpu_, o.x, DType::kF32, {t, h});
  DeviceTensor gw = Upload(*gpu_, o.gate_w, DType::kBF16, {kP, h});
  DeviceTensor ple = Upload(*gpu_, o.ple, DType::kBF16, {t, 3 * kP});
  DeviceTensor prw = Upload(*gpu_, o.proj_w, DType::kBF16, {h, kP});
  DeviceTensor pw = Upload(*gpu_, o.pw, DType::kF32, {h});
  DeviceTensor scratch = Upload(*gpu_, std::vector<float>(4 * h), DType::kBF16, {4, h});
  auto good = [&] {
    PleTailArgs a;
    a.x = x.t;
    a.gate_w = gw.t;
    a.ple_input = ple.t.Cols(0, kP);
    a.proj_w = prw.t;
    a.post_weight = pw.t;
    a.gate = scratch.t.Rows(0, 1).Cols(0, kP);
    a.gated = scratch.t.Rows(1, 1).Cols(0, kP);
    a.proj = scratch.t.Rows(2, 1);
    return a;
  };
  ASSERT_TRUE(gpu_->PleTail(good()).ok());
  DeviceTensor short_pw = Upload(*gpu_, std::vector<float>(h - 8, 1.f), DType::kF32, {h - 8});
  PleTailArgs short_post = good();
  short_post.post_weight = short_pw.t;
  PleTailArgs wide_ple = good();
  wide_ple.ple_input = ple.t.Cols(0, 2 * kP);
  for (const PleTailArgs& a : {short_post, wide_ple}) {
    const absl::Status st = gpu_->PleTail(a);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  }
  ASSERT_TRUE(gpu_->Synchronize().ok());
}

// A backend that runs PleTail as its separate ops on the wrapped backend.
class SplitPleTail final : public backend::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status PleTail(const PleTailArgs& a) override { return Backend::PleTail(a); }
};

// E2B and E4B at full width through the runner: 8 layers (two of them KV-shared), a 4096-token
// vocabulary, synthetic weights; a 12-token prefill of two sequences (the separate ops in both
// runners) and 6 decode steps of both, then 6 of one (the kernel in the fused runner), each
// step's logits within bf16 precision of the split runner's. Both are fed the split runner's
// tokens.
class CudaPleTailRunnerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaPleTailRunnerTest, FusedAndSplitRunnersAgree) {
  GANNET_REQUIRE_GPU();
  auto cfg = model::DummyModelConfig("dummy:" + GetParam());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  model::ModelConfig config = *cfg;
  config.text.num_hidden_layers = 8;
  config.text.layer_types.resize(8);
  config.text.num_kv_shared_layers = 2;
  config.text.vocab_size = 4096;
  config.text.vocab_size_per_layer_input = 4096;
  ASSERT_TRUE(config.text.has_ple());
  const model::ModelWeights weights = model::SyntheticWeights(config, model::kDummyWeightSeed);
  auto fused_be = backend::CudaBackend::Create(0);
  auto inner = backend::CudaBackend::Create(0);
  ASSERT_TRUE(fused_be.ok() && inner.ok());
  SplitPleTail split_be(std::move(*inner));
  constexpr int kMaxLen = 64;
  const auto opts = testing::SimpleRunnerOptions(config, 16, kMaxLen, 2, kMaxLen);
  auto fused = testing::CreateTinyRunner(config, weights, fused_be->get(), opts, kMaxLen, 2);
  auto split = testing::CreateTinyRunner(config, weights, &split_be, opts, kMaxLen, 2);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(split.ok()) << split.status();
  const int pages = kMaxLen / 16;
  std::vector<int32_t> tables[2] = {testing::IdentityPageTable(0, pages),
                                    testing::IdentityPageTable(1, pages)};
  std::vector<int32_t> tokens[2];
  for (int s = 0; s < 2; ++s) {
    for (int i = 0; i < 12; ++i) tokens[s].push_back((i * 317 + s * 1009 + 11) % 4096);
  }
  const int vocab = static_cast<int>(config.text.vocab_size);
  double worst = 0;
  for (int step = 0; step < 13; ++step) {
    const int seqs = step < 7 ? 2 : 1;  // step 0: prefill of both; 1-6: two rows; 7-12: one
    runner::StepBatch b;
    for (int s = 0; s < seqs; ++s) {
      runner::SeqStep q;
      const int begin = step == 0 ? 0 : static_cast<int>(tokens[s].size()) - 1;
      q.tokens = std::span<const int32_t>(tokens[s].data() + begin, tokens[s].size() - begin);
      q.start_pos = begin;
      q.page_table[0] = tables[s];
      q.page_table[1] = tables[s];
      q.logits = runner::SeqStep::Logits::kLast;
      b.seqs.push_back(q);
    }
    runner::StepResult f, r;
    ASSERT_TRUE((*fused)->Forward(b, &f).ok());
    ASSERT_TRUE((*split)->Forward(b, &r).ok());
    ASSERT_EQ(f.rows(), seqs);
    const double err = testing::MaxRelativeLogitError(f.logits.data(), r.logits.data(), seqs, vocab);
    worst = std::max(worst, err);
    EXPECT_LE(err, kBf16Tol) << "step " << step;
    for (int s = 0; s < seqs; ++s) {
      const float* row = r.logits.data() + static_cast<size_t>(s) * vocab;
      tokens[s].push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
    }
  }
  std::printf("[ note ] %s: fused vs split PLE tail, worst decode-step max rel logit error %.2e\n",
              GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(PleVariants, CudaPleTailRunnerTest, ::testing::Values("e2b", "e4b"));

}  // namespace
}  // namespace gannet
