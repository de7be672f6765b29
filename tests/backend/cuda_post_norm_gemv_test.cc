// Backend::ProjectPostNormResidual on the CUDA backend. At one row, where the projection runs on
// the GEMV, the GEMV's last CTA applies the update: bit for bit the projection then
// PostNormResidual (the projection's output, the residual and the next output), at hidden sizes
// of each row length the kernel is built for (2, 4 and 8 values a played thread, a partial last
// CTA, a row the update's weight prefetch skips), gated and not, with and without the layer
// scalar and the next norm (weighted or not), with bf16 weights and with the fp16 compute path's
// types; and again on the same counter (each launch leaves its counter zero). At two rows, or with
// cuBLASLt pinned, the op is the two ops.
#include <cmath>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "kernels/gemm/gemv.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/backend/cuda/cuda_linear.h"
#include "tests/backend/cuda_test_util.h"

namespace gannet {
namespace {

using backend::CudaLinear;
using backend::PostNormUpdate;
using backend::Tensor;
using testing::DeviceTensor;
using testing::Download;
using testing::RandomNormal;
using testing::Upload;

class CudaPostNormGemvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
    auto b = backend::CudaBackend::Create(0);
    ASSERT_TRUE(b.ok()) << b.status();
    gpu_ = std::move(*b);
  }
  void ExpectSameBits(const Tensor& got, const Tensor& want, const std::string& what) {
    const std::vector<float> g = Download(*gpu_, got), w = Download(*gpu_, want);
    ASSERT_EQ(g.size(), w.size()) << what;
    for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], w[i]) << what << " element " << i;
  }
  std::unique_ptr<backend::CudaBackend> gpu_;
};

struct Update {
  bool scalar;
  int next;  // 0: no next norm, 1: without a weight, 2: weighted
};

TEST_F(CudaPostNormGemvTest, ProjectPostNormResidualIsTheTwoOpsBitForBit) {
  constexpr int kK = 704;
  constexpr float kEps = 1e-6f;
  for (const DType wt : {DType::kBF16, DType::kF16}) {
    const DType out_t = wt == DType::kBF16 ? DType::kBF16 : DType::kF32;
    const DType next_t = wt;
    gpu_->linear().Force(CudaLinear::Path::kGemv);
    for (const int n : {8, 1002, 1536, 2816, 5376, kernels::kGemvPostNormMaxN}) {
      for (const bool gated : {false, true}) {
        for (const Update upd : {Update{false, 0}, Update{true, 2}, Update{false, 1}}) {
          for (const int m : {1, 2}) {
            const std::string what =
                fmt::format("{} n={} {} scalar={} next={} m={}", DTypeName(wt), n,
                            gated ? "gated" : "plain", upd.scalar, upd.next, m);
            const uint64_t seed = static_cast<uint64_t>(n) * 8 + gated * 4 + upd.next + m;
            const int in_cols = gated ? 2 * kK : kK;
            DeviceTensor dx =
                Upload(*gpu_, RandomNormal(m * in_cols, seed, 1.5f), wt, {m, in_cols});
            const Tensor x = gated ? dx.t.Cols(0, kK) : dx.t;
            const Tensor up = gated ? dx.t.Cols(kK, kK) : Tensor();
            DeviceTensor dw = Upload(
                *gpu_, RandomNormal(static_cast<size_t>(n) * kK, seed + 1, 1.0f / std::sqrt(kK)),
                wt, {n, kK});
            std::vector<float> pw = RandomNormal(n, seed + 2, 0.3f);
            for (float& v : pw) v += 1.0f;
            DeviceTensor dpw = Upload(*gpu_, pw, DType::kF32, {n});
            DeviceTensor dnw = Upload(*gpu_, RandomNormal(n, seed + 3, 0.3f), DType::kF32, {n});
            DeviceTensor ds = Upload(*gpu_, {0.75f}, DType::kF32, {1});
            const std::vector<float> res0 = RandomNormal(m * n, seed + 4, 3.0f, false);
            const std::vector<float> nan(static_cast<size_t>(m) * std::max(n, kK), NAN);
            auto fresh = [&](DType t, int cols) {
              return Upload(*gpu_, std::vector<float>(nan.begin(), nan.begin() + m * cols), t,
                            {m, cols});
            };

            // The two ops (the gated projection tunes act's shape on its first call).
            DeviceTensor act_a = fresh(wt, kK), out_a = fresh(out_t, n), next_a = fresh(next_t, n);
            DeviceTensor res_a = Upload(*gpu_, res0, DType::kF32, {m, n});
            PostNormUpdate ua{dpw.t,
                              res_a.t,
                              upd.scalar ? ds.t : Tensor(),
                              upd.next == 2 ? dnw.t : Tensor(),
                              upd.next > 0 ? next_a.t : Tensor(),
                              kEps};
            ASSERT_TRUE((gated ? gpu_->GeluMulLinear(x, up, dw.t, act_a.t, out_a.t)
                               : gpu_->Linear(x, dw.t, out_a.t))
                            .ok())
                << what;
            ASSERT_TRUE(gpu_->PostNormResidual(out_a.t, ua.post_weight, ua.residual, ua.scalar,
                                               ua.next_weight, ua.next_out, kEps)
                            .ok())
                << what;

            DeviceTensor act_f = fresh(wt, kK), out_f = fresh(out_t, n), next_f = fresh(next_t, n);
            DeviceTensor res_f = Upload(*gpu_, res0, DType::kF32, {m, n});
            PostNormUpdate uf = ua;
            uf.residual = res_f.t;
            uf.next_out = upd.next > 0 ? next_f.t : Tensor();
            // Twice: the second call starts from the first's counter, left zero.
            for (int round = 0; round < 2; ++round) {
              const std::string at = fmt::format("{} round {}", what, round);
              ASSERT_TRUE(gpu_->CopyToDevice(res_f.t.data, res0.data(), res0.size() * 4).ok());
              auto fused = gpu_->linear().RunPostNorm(x, up, dw.t, act_f.t, out_f.t, uf);
              ASSERT_TRUE(fused.ok()) << at << ": " << fused.status();
              EXPECT_EQ(*fused, m == 1) << at;
              if (!*fused) {
                ASSERT_TRUE(gpu_->ProjectPostNormResidual(x, up, dw.t, act_f.t, out_f.t, uf).ok())
                    << at;
              }
              ExpectSameBits(out_f.t, out_a.t, at + " projection");
              ExpectSameBits(res_f.t, res_a.t, at + " residual");
              if (upd.next > 0) ExpectSameBits(next_f.t, next_a.t, at + " next output");
            }
          }
        }
      }
    }
  }

  // cuBLASLt pinned: never fused, and the op still applies the update.
  gpu_->linear().Force(CudaLinear::Path::kCublasLt);
  const int n = 1536;
  DeviceTensor dx = Upload(*gpu_, RandomNormal(kK, 7, 1.5f), DType::kBF16, {1, kK});
  DeviceTensor dw = Upload(*gpu_, RandomNormal(n * kK, 8, 0.04f), DType::kBF16, {n, kK});
  DeviceTensor dpw = Upload(*gpu_, std::vector<float>(n, 1.0f), DType::kF32, {n});
  const std::vector<float> res0 = RandomNormal(n, 9, 3.0f, false);
  DeviceTensor out_a = Upload(*gpu_, std::vector<float>(n), DType::kBF16, {1, n});
  DeviceTensor out_f = Upload(*gpu_, std::vector<float>(n), DType::kBF16, {1, n});
  DeviceTensor res_a = Upload(*gpu_, res0, DType::kF32, {1, n});
  DeviceTensor res_f = Upload(*gpu_, res0, DType::kF32, {1, n});
  ASSERT_TRUE(gpu_->Linear(dx.t, dw.t, out_a.t).ok());
  ASSERT_TRUE(
      gpu_->PostNormResidual(out_a.t, dpw.t, res_a.t, Tensor(), Tensor(), Tensor(), 1e-6f).ok());
  const PostNormUpdate u{dpw.t, res_f.t, Tensor(), Tensor(), Tensor(), 1e-6f};
  auto fused = gpu_->linear().RunPostNorm(dx.t, Tensor(), dw.t, Tensor(), out_f.t, u);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_FALSE(*fused);
  ASSERT_TRUE(gpu_->ProjectPostNormResidual(dx.t, Tensor(), dw.t, Tensor(), out_f.t, u).ok());
  ExpectSameBits(out_f.t, out_a.t, "cuBLASLt projection");
  ExpectSameBits(res_f.t, res_a.t, "cuBLASLt residual");
  gpu_->linear().Force(std::nullopt);
}

}  // namespace
}  // namespace gannet
