// int4 (W4A16) weights on the CUDA backend (lib/backend/cuda/cuda_int4.cc), against the CPU
// backend on the same bytes:
//   - the linear layer at row counts that take each path (M <= 32: the registry's int4 GEMV with
//     1, 2 or 4 column tiles; 33-64: that GEMV in chunks of 32; more: the weight dequantized a
//     slice of rows at a time and multiplied by cuBLASLt), with the path each took checked, on a
//     weight large enough to be cut into several slices;
//   - the trained tiny model quantized by `gannet quantize` (compressed-tensors pack-quantized:
//     symmetric g32, asymmetric g64, per-channel) end to end: all-position prefill logits of
//     prompts of 5, 24 and 80 tokens on the GPU within the bf16 bound of the f32 CPU
//     (bf16_cpu_backend.h);
//   - refusals: a weight whose K is not a multiple of 64, with UNIMPLEMENTED naming the tensor.
// Runs on the GPU machine (LABELS gpu); skips without a device.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/quant/int4_repack.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/backend/cuda/cuda_linear.h"
#include "lib/model/quantize_checkpoint.h"
#include "tests/backend/bf16_cpu_backend.h"
#include "tests/backend/cuda_test_util.h"
#include "tests/kernels/int4_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

using backend::CudaLinear;

// A random int4 weight [n, k] (tests/kernels/int4_test_util.h), its device form uploaded by
// hand (what LoadWeight makes from a checkpoint) and its f32 values.
struct DeviceInt4 {
  std::vector<float> dense;  // [n, k]
  backend::Buffer buf;
  backend::Tensor t;
};

DeviceInt4 UploadInt4(backend::CudaBackend& be, const kernels::testing::CanonicalWeight& cw) {
  DeviceInt4 w;
  w.dense.resize(static_cast<size_t>(cw.n * cw.k));
  kernels::Int4DequantizeCanonical(cw.format, cw.n, cw.k, cw.view(), w.dense.data());
  kernels::Int4Repacked dev;
  EXPECT_EQ(kernels::Int4Repack(cw.format, cw.n, cw.k, cw.view(), &dev), nullptr);
  const size_t pb = (dev.packed.size() + 255) / 256 * 256;
  const size_t sb = (dev.scales.size() + 255) / 256 * 256;
  auto buf = be.Allocate(pb + sb + dev.zero_points.size());
  EXPECT_TRUE(buf.ok()) << buf.status();
  w.buf = std::move(*buf);
  char* base = static_cast<char*>(w.buf.data());
  EXPECT_TRUE(be.CopyToDevice(base, dev.packed.data(), dev.packed.size()).ok());
  EXPECT_TRUE(be.CopyToDevice(base + pb, dev.scales.data(), dev.scales.size()).ok());
  if (!dev.zero_points.empty()) {
    EXPECT_TRUE(
        be.CopyToDevice(base + pb + sb, dev.zero_points.data(), dev.zero_points.size()).ok());
  }
  w.t = backend::Tensor::Make(base, cw.format.elem, {cw.n, cw.k});
  w.t.format = cw.format;
  w.t.scales = base + pb;
  w.t.zero_points =
      dev.zero_points.empty() ? nullptr : reinterpret_cast<const uint8_t*>(base + pb + sb);
  return w;
}

std::string PathName(CudaLinear::Path p) {
  switch (p) {
    case CudaLinear::Path::kInt4Kernel:
      return "int4 kernel";
    case CudaLinear::Path::kInt4Dense:
      return "dequantized + cuBLASLt";
    default:
      return "bf16 path";
  }
}

TEST(CudaInt4Linear, EveryPathMatchesTheDequantizedProduct) {
  GANNET_REQUIRE_GPU();
  auto be = backend::CudaBackend::Create(0);
  ASSERT_TRUE(be.ok()) << be.status();
  // 53,264 rows at K = 640: the 64 MiB dense scratch holds 52,428 rows, so the dequantized path
  // runs two slices (the second ragged).
  struct Case {
    int64_t n, k;
    int group;
    bool asym;
    std::vector<int> ms;
  };
  const std::vector<int> all = {1, 5, 8, 9, 16, 17, 24, 32, 33, 64, 65, 80};
  for (const Case& c : {Case{1040, 640, 32, false, all}, Case{528, 192, 64, true, all},
                        Case{528, 1024, 1024, false, all}, Case{53264, 640, 128, false, {2, 40}}}) {
    const auto cw = kernels::testing::RandomInt4(c.asym ? DType::kU4 : DType::kI4, c.group,
                                                 DType::kBF16, c.n, c.k, 7);
    DeviceInt4 w = UploadInt4(**be, cw);
    for (int m : c.ms) {
      SCOPED_TRACE(::testing::Message() << "n " << c.n << " k " << c.k << " g" << c.group
                                        << (c.asym ? " asym" : "") << " m " << m);
      const std::vector<float> x = testing::RandomNormal(static_cast<size_t>(m * c.k), 11 + m);
      std::vector<float> ref(static_cast<size_t>(m * c.n));
      double ref_max = 0;
      for (int i = 0; i < m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double acc = 0;
          const float* wr = &w.dense[j * c.k];
          for (int64_t l = 0; l < c.k; ++l) acc += static_cast<double>(x[i * c.k + l]) * wr[l];
          ref[i * c.n + j] = static_cast<float>(acc);
          ref_max = std::max(ref_max, std::fabs(acc));
        }
      }
      auto xd = testing::Upload(**be, x, DType::kBF16, {m, c.k});
      auto out = testing::Upload(**be, std::vector<float>(ref.size(), 0.f), DType::kF32, {m, c.n});
      auto used = (*be)->linear().Run(xd.t, w.t, out.t);
      ASSERT_TRUE(used.ok()) << used.status();
      const CudaLinear::Path want =
          m <= 64 ? CudaLinear::Path::kInt4Kernel : CudaLinear::Path::kInt4Dense;
      EXPECT_EQ(PathName(used->path), PathName(want));
      const std::vector<float> got = testing::Download(**be, out.t);
      // The int4 kernels multiply exact integers and scale per group in f32; the dense path
      // rounds each dequantized weight to bf16 (2^-9 relative) first.
      EXPECT_LE(testing::MaxAbsDiff(got, ref), 1e-2 * ref_max);
      EXPECT_LE(testing::RelL2(got, ref), 4e-3);
    }
  }
}

// The trained tiny model as `gannet quantize` writes it for each int4 scheme.
class CudaInt4ModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaInt4ModelTest, PrefillLogitsMatchCpu) {
  GANNET_REQUIRE_GPU();
  const std::string dir =
      std::filesystem::path(::testing::TempDir()) / ("gannet_cuda_int4_" + GetParam());
  std::filesystem::remove_all(dir);
  auto options = model::ParseWeightDtype(GetParam());
  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_TRUE(model::QuantizeCheckpoint(testing::TinyModelDir("trained"), dir, *options).ok());
  auto m = testing::LoadModelFolder(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*m)->weights.layers[0].down_proj.quantized());
  auto gpu = backend::CudaBackend::Create(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  backend::CpuBackend cpu;
  testing::Bf16ActivationCpuBackend bf16((*m)->config.text.hidden_size,
                                         (*m)->config.text.vocab_size);
  const int vocab = static_cast<int>((*m)->config.text.vocab_size);
  for (int n : {5, 24, 80}) {
    std::vector<int32_t> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = 2 + (i * 37 + 11) % (vocab - 2);
    auto c = testing::PrefillLogits(**m, &cpu, ids);
    ASSERT_TRUE(c.ok()) << c.status();
    auto b = testing::PrefillLogits(**m, &bf16, ids);
    ASSERT_TRUE(b.ok()) << b.status();
    auto g = testing::PrefillLogits(**m, gpu->get(), ids);
    ASSERT_TRUE(g.ok()) << g.status();
    const double err = testing::MaxRelativeLogitError(g->data(), c->data(), n, vocab);
    const double gap = testing::MaxRelativeLogitError(b->data(), c->data(), n, vocab);
    std::printf("[ note ] %s, %d tokens: max rel logit error vs f32 CPU %.4f (bf16 CPU %.4f)\n",
                GetParam().c_str(), n, err, gap);
    EXPECT_LE(err, testing::Bf16GapBound(gap)) << GetParam() << ", " << n << " tokens";
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Schemes, CudaInt4ModelTest,
                         ::testing::Values("int4-g32", "int4-g64-asym", "int4-channel"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) ch = ch == '-' ? '_' : ch;
                           return s;
                         });

TEST(CudaInt4Refusal, WeightsTheKernelsCannotTakeAreUnimplementedByName) {
  GANNET_REQUIRE_GPU();
  // The tiny E4B's hidden size is 32: its q_proj is quantized at g32 and its K is not a multiple
  // of 64.
  const std::string dir = std::filesystem::path(::testing::TempDir()) / "gannet_cuda_int4_e4b";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(
      model::QuantizeCheckpoint(testing::TinyModelDir("e4b"), dir, model::QuantizeOptions{}).ok());
  auto m = testing::LoadModelFolder(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  auto be = backend::CudaBackend::Create(0);
  ASSERT_TRUE(be.ok()) << be.status();
  const model::WeightView& q = (*m)->weights.layers[0].q_proj;
  ASSERT_TRUE(q.quantized());
  const model::WeightView* parts[] = {&q};
  auto t = (*be)->LoadWeight(parts);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented) << t.status();
  EXPECT_NE(std::string(t.status().message()).find(q.name), std::string::npos) << t.status();
  EXPECT_NE(std::string(t.status().message()).find("multiple of 64"), std::string::npos)
      << t.status();
  // A plain weight of the same checkpoint still loads.
  const model::WeightView* plain[] = {&(*m)->weights.embed_tokens};
  EXPECT_TRUE((*be)->LoadWeight(plain).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gannet
