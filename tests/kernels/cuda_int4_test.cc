// The W4A16 int4 kernels (kernels/quant/int4_linear.h) against the CPU reference that
// dequantizes the same canonical bytes (kernels/quant/int4_repack.h): every kernel (MMA GEMV, MMA
// GEMM, SIMT), x bf16 / f16, out x's type / f32, kI4 and kU4 + zero points, groups 32/64/128 and
// per-channel, scales bf16 / f16 / f32, odd N, M from 1 to 130; the split-K GEMV; the
// dequantization kernel; the registry's choice per M and arch; argument checks (no GPU needed).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/quant/int4_entries.h"
#include "kernels/quant/int4_linear.h"
#include "kernels/quant/int4_repack.h"
#include "kernels/registry/registry.h"
#include "tests/kernels/int4_test_util.h"

namespace gannet::kernels {
namespace {

using testing::CanonicalWeight;
using testing::FloatToBf16Bits;
using testing::FloatToF16Bits;
using testing::RandomInt4;

bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
#define REQUIRE_GPU()                                 \
  do {                                                \
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(expr)

// A device allocation freed at scope exit.
struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes > 0 ? bytes : 16), cudaSuccess); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

// The device form of one canonical weight.
struct DeviceWeight {
  Int4Repacked host;
  DevBuf w, s, z;
  explicit DeviceWeight(const CanonicalWeight& cw)
      : host(Repack(cw)), w(host.packed.size()), s(host.scales.size()), z(host.zero_points.size()) {
    EXPECT_EQ(cudaMemcpy(w.p, host.packed.data(), host.packed.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(s.p, host.scales.data(), host.scales.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    if (!host.zero_points.empty()) {
      EXPECT_EQ(
          cudaMemcpy(z.p, host.zero_points.data(), host.zero_points.size(), cudaMemcpyHostToDevice),
          cudaSuccess);
    }
  }
  static Int4Repacked Repack(const CanonicalWeight& cw) {
    Int4Repacked r;
    const char* err = Int4Repack(cw.format, cw.n, cw.k, cw.view(), &r);
    EXPECT_EQ(err, nullptr) << err;
    return r;
  }
};

// x [m, ldx] as bits of `type` plus its exact values as f32.
struct Activations {
  std::vector<uint16_t> bits;
  std::vector<float> values;
};
Activations RandomX(DType type, int m, int64_t k, int64_t ldx, uint64_t seed) {
  Activations a;
  a.bits.assign(static_cast<size_t>(m * ldx), 0);
  a.values.assign(static_cast<size_t>(m * k), 0.f);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  for (int i = 0; i < m; ++i) {
    for (int64_t c = 0; c < k; ++c) {
      float v = d(rng);
      if (std::fabs(v) < 1e-3f) v = v < 0 ? -1e-3f : 1e-3f;  // normal numbers in f16 too
      const uint16_t b = type == DType::kBF16 ? FloatToBf16Bits(v) : FloatToF16Bits(v);
      a.bits[i * ldx + c] = b;
      a.values[i * k + c] = Int4ScaleToFloat(type, &b, 0);
    }
  }
  return a;
}

struct Case {
  Int4Kernel kernel;
  DType x_type, out_type, elem, scale;
  int group;  // 0 = per-channel
  int m;
  int64_t n, k;
  int splits = 1;
};

std::string Describe(const Case& c) {
  const char* names[] = {"mma_gemv", "mma_gemm", "simt"};
  return std::string(names[static_cast<int>(c.kernel)]) + " x " +
         std::string(DTypeShortName(c.x_type)) + " out " + std::string(DTypeShortName(c.out_type)) +
         " " + std::string(DTypeShortName(c.elem)) + " scale " +
         std::string(DTypeShortName(c.scale)) + " g" + std::to_string(c.group) + " m" +
         std::to_string(c.m) + " n" + std::to_string(c.n) + " k" + std::to_string(c.k) + " splits" +
         std::to_string(c.splits);
}

// Runs one case on the device and compares with the reference: the dequantized weight times the
// exact x, summed in double. The kernels multiply exact integers by exact x and sum in f32, so
// the bound is f32 summation over |x| |w| plus the output's rounding.
void RunCase(const Case& c, uint64_t seed) {
  SCOPED_TRACE(Describe(c));
  const int group = c.group == 0 ? static_cast<int>(c.k) : c.group;
  const CanonicalWeight cw = RandomInt4(c.elem, group, c.scale, c.n, c.k, seed);
  std::vector<float> wref(static_cast<size_t>(c.n * c.k));
  Int4DequantizeCanonical(cw.format, c.n, c.k, cw.view(), wref.data());
  const int64_t ldx = c.k + 8;  // a padded stride: rows are not contiguous
  const Activations x = RandomX(c.x_type, c.m, c.k, ldx, seed + 1);
  DeviceWeight dw(cw);
  DevBuf xd(x.bits.size() * 2);
  CUDA_OK(cudaMemcpy(xd.p, x.bits.data(), x.bits.size() * 2, cudaMemcpyHostToDevice));
  const int64_t ldo = c.n + 3;
  const size_t ob = c.out_type == DType::kF32 ? 4 : 2;
  DevBuf od(static_cast<size_t>(c.m * ldo) * ob);
  CUDA_OK(cudaMemset(od.p, 0xFF, static_cast<size_t>(c.m * ldo) * ob));  // NaN where unwritten
  Int4LinearParams p;
  p.x = xd.p;
  p.out = od.p;
  p.w = dw.w.as<uint8_t>();
  p.scales = dw.s.p;
  p.zero_points = cw.format.zero_point ? dw.z.as<uint8_t>() : nullptr;
  p.layout = dw.host.layout;
  p.m = c.m;
  p.ldx = ldx;
  p.ldo = ldo;
  p.x_type = c.x_type;
  p.out_type = c.out_type;
  p.splits = c.splits;
  DevBuf ws(Int4GemvWorkspaceBytes(c.m, p.layout.n_pad, c.splits));
  p.workspace = ws.p;
  const char* why = Int4LinearError(c.kernel, p);
  ASSERT_EQ(why, nullptr) << why;
  CUDA_OK(LaunchInt4Linear(c.kernel, p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> out(static_cast<size_t>(c.m * ldo) * ob);
  CUDA_OK(cudaMemcpy(out.data(), od.p, out.size(), cudaMemcpyDeviceToHost));
  const double out_rel = c.out_type == DType::kBF16  ? 1.0 / 256
                         : c.out_type == DType::kF16 ? 1.0 / 2048
                                                     : 0;
  int bad = 0;
  for (int i = 0; i < c.m; ++i) {
    for (int64_t r = 0; r < c.n; ++r) {
      double ref = 0, l1 = 0;
      for (int64_t kk = 0; kk < c.k; ++kk) {
        const double prod = static_cast<double>(x.values[i * c.k + kk]) * wref[r * c.k + kk];
        ref += prod;
        l1 += std::fabs(prod);
      }
      const float got = Int4ScaleToFloat(c.out_type, out.data(), i * ldo + r);
      const double tol = 2e-6 * l1 + out_rel * std::fabs(ref) + 1e-6;
      if (!(std::fabs(got - ref) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << "out[" << i << "][" << r << "] = " << got << ", reference " << ref
                      << " (tol " << tol << ")";
      }
    }
    // Past n in the padded stride nothing is written.
    for (int64_t r = c.n; r < ldo; ++r) {
      const float v = Int4ScaleToFloat(c.out_type, out.data(), i * ldo + r);
      if (!std::isnan(v) && ++bad <= 5) ADD_FAILURE() << "wrote out[" << i << "][" << r << "]";
    }
  }
  EXPECT_EQ(bad, 0);
}

const DType kScales[] = {DType::kBF16, DType::kF16, DType::kF32};

// Every kernel, type and format at a few shapes (odd N: ragged last row block).
TEST(CudaInt4, EveryVariantMatchesTheReference) {
  REQUIRE_GPU();
  uint64_t seed = 1;
  for (Int4Kernel kernel : {Int4Kernel::kMmaGemv, Int4Kernel::kMmaGemm, Int4Kernel::kSimt}) {
    for (DType xt : {DType::kBF16, DType::kF16}) {
      for (DType elem : {DType::kI4, DType::kU4}) {
        for (int group : {32, 64, 128, 0}) {
          for (bool f32_out : {false, true}) {
            const DType scale = kScales[seed % 3];
            const int m = kernel == Int4Kernel::kMmaGemv ? 1 + static_cast<int>(seed % 8)
                                                         : (seed % 2 ? 3 : 70);
            const int64_t n = seed % 2 ? 37 : 130, k = group == 128 || seed % 3 ? 384 : 192;
            RunCase({kernel, xt, f32_out ? DType::kF32 : xt, elem, scale, group, m, n, k}, seed++);
          }
        }
      }
    }
  }
}

TEST(CudaInt4, GemvEveryM) {
  REQUIRE_GPU();
  for (int m = 1; m <= kInt4GemvMaxM; ++m) {
    RunCase({Int4Kernel::kMmaGemv, DType::kBF16, DType::kBF16, DType::kI4, DType::kBF16, 32, m, 301,
             1024},
            100 + m);
    RunCase({Int4Kernel::kSimt, DType::kF16, DType::kF16, DType::kU4, DType::kF16, 128, m, 77, 512},
            200 + m);
  }
}

TEST(CudaInt4, GemvSplitOverK) {
  REQUIRE_GPU();
  for (int splits : {2, 3, 8}) {
    RunCase({Int4Kernel::kMmaGemv, DType::kBF16, DType::kF32, DType::kI4, DType::kBF16, 32, 4, 45,
             2048, splits},
            300 + splits);
    RunCase({Int4Kernel::kMmaGemv, DType::kF16, DType::kF16, DType::kU4, DType::kF32, 0, 1, 16,
             1024, splits},
            400 + splits);
  }
}

TEST(CudaInt4, GemmShapes) {
  REQUIRE_GPU();
  uint64_t seed = 500;
  for (int m : {9, 64, 65, 130}) {
    for (int64_t n : {1, 63, 200}) {
      for (int group : {32, 128}) {
        RunCase({Int4Kernel::kMmaGemm, DType::kBF16, DType::kBF16, DType::kI4, DType::kBF16, group,
                 m, n, 640},
                seed++);
        RunCase({Int4Kernel::kSimt, DType::kBF16, DType::kF32, DType::kU4, DType::kBF16, group, m,
                 n, 256},
                seed++);
      }
    }
  }
}

// Gemma-4 sized rows (K of 31B's down projection), few outputs.
TEST(CudaInt4, LongK) {
  REQUIRE_GPU();
  RunCase({Int4Kernel::kMmaGemv, DType::kBF16, DType::kBF16, DType::kI4, DType::kBF16, 32, 1, 48,
           21504, 4},
          600);
  RunCase({Int4Kernel::kMmaGemm, DType::kBF16, DType::kBF16, DType::kI4, DType::kBF16, 32, 17, 48,
           21504},
          601);
  RunCase({Int4Kernel::kSimt, DType::kF16, DType::kF16, DType::kI4, DType::kBF16, 0, 2, 48, 5376},
          602);
}

TEST(CudaInt4, DequantizeMatchesTheReference) {
  REQUIRE_GPU();
  uint64_t seed = 700;
  for (DType elem : {DType::kI4, DType::kU4}) {
    for (int group : {32, 64, 128, 0}) {
      for (DType out_type : {DType::kBF16, DType::kF16}) {
        const int64_t n = 45, k = 384;
        const CanonicalWeight cw = RandomInt4(elem, group == 0 ? static_cast<int>(k) : group,
                                              kScales[seed % 3], n, k, seed);
        ++seed;
        std::vector<float> wref(static_cast<size_t>(n * k));
        Int4DequantizeCanonical(cw.format, n, k, cw.view(), wref.data());
        DeviceWeight dw(cw);
        DevBuf dense(static_cast<size_t>(n * k) * 2);
        CUDA_OK(LaunchInt4Dequantize(dw.host.layout, dw.w.as<uint8_t>(), dw.s.p,
                                     cw.format.zero_point ? dw.z.as<uint8_t>() : nullptr, out_type,
                                     dense.p, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint16_t> got(static_cast<size_t>(n * k));
        CUDA_OK(cudaMemcpy(got.data(), dense.p, got.size() * 2, cudaMemcpyDeviceToHost));
        const float rel = out_type == DType::kBF16 ? 1.f / 256 : 1.f / 2048;
        int bad = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          const float g = Int4ScaleToFloat(out_type, got.data(), static_cast<int64_t>(i));
          if (!(std::fabs(g - wref[i]) <= rel * std::fabs(wref[i])) && ++bad <= 5) {
            ADD_FAILURE() << "w[" << i << "] = " << g << ", reference " << wref[i];
          }
        }
        EXPECT_EQ(bad, 0);
      }
    }
  }
}

// The registry picks the GEMV up to M = 8 and the GEMM above on sm_80+, the SIMT kernel on
// sm_70/75; its launches (with the GEMV's own split and workspace) match the reference.
TEST(CudaInt4, RegistryChoosesByMAndArch) {
  Int4LinearParams p;
  alignas(16) static uint16_t x_dummy[8];
  p.x = x_dummy;
  p.layout = Int4LayoutOf(WeightFormat::Int4(32), 5376, 5376);
  p.ldx = 5376;
  DeviceInfo dev;
  dev.sm = 90;
  dev.num_sms = 132;
  dev.max_smem_optin = 227 * 1024;
  const int archs[] = {70, 75, 80, 90};
  for (int m : {1, 8, 9, 32, 33, 2048}) {
    p.m = m;
    const Selection sel = Select(Int4Problem(p), dev, archs);
    ASSERT_NE(sel.entry, nullptr) << sel.error;
    EXPECT_STREQ(sel.entry->name, m <= 32 ? "sm80_int4_gemv_bf16_i4" : "sm80_int4_gemm_bf16_i4")
        << m;
  }
  dev.sm = 70;
  const Selection volta = Select(Int4Problem(p), dev, archs);
  ASSERT_NE(volta.entry, nullptr) << volta.error;
  EXPECT_STREQ(volta.entry->name, "sm70_int4_simt_bf16_i4");
  p.layout.group = 48;  // not a group the kernels take
  dev.sm = 90;
  EXPECT_EQ(Select(Int4Problem(p), dev, archs).entry, nullptr);
}

TEST(CudaInt4, RegistryLaunchesMatchTheReference) {
  REQUIRE_GPU();
  DeviceInfo dev;
  CUDA_OK(DeviceInfo::Query(0, &dev));
  for (int m : {1, 5, 40}) {
    const int64_t n = 70, k = 1024;
    const CanonicalWeight cw = RandomInt4(DType::kU4, 64, DType::kF16, n, k, 800 + m);
    std::vector<float> wref(static_cast<size_t>(n * k));
    Int4DequantizeCanonical(cw.format, n, k, cw.view(), wref.data());
    const Activations x = RandomX(DType::kF16, m, k, k, 900 + m);
    DeviceWeight dw(cw);
    DevBuf xd(x.bits.size() * 2), od(static_cast<size_t>(m * n) * 4);
    CUDA_OK(cudaMemcpy(xd.p, x.bits.data(), x.bits.size() * 2, cudaMemcpyHostToDevice));
    Int4LinearParams p;
    p.x = xd.p;
    p.out = od.p;
    p.w = dw.w.as<uint8_t>();
    p.scales = dw.s.p;
    p.zero_points = dw.z.as<uint8_t>();
    p.layout = dw.host.layout;
    p.m = m;
    p.ldx = k;
    p.ldo = n;
    p.x_type = DType::kF16;
    p.out_type = DType::kF32;
    const ProblemKey pk = Int4Problem(p);
    const Selection sel = Select(pk, dev);
    ASSERT_NE(sel.entry, nullptr) << sel.error;
    DevBuf ws(sel.entry->workspace_bytes(pk, dev));
    CUDA_OK(sel.entry->launch(&p, pk, dev, ws.p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> out(static_cast<size_t>(m * n));
    CUDA_OK(cudaMemcpy(out.data(), od.p, out.size() * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < m; ++i) {
      for (int64_t r = 0; r < n; ++r) {
        double ref = 0, l1 = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          ref += static_cast<double>(x.values[i * k + kk]) * wref[r * k + kk];
          l1 += std::fabs(static_cast<double>(x.values[i * k + kk]) * wref[r * k + kk]);
        }
        ASSERT_NEAR(out[i * n + r], ref, 2e-6 * l1 + 1e-6)
            << sel.entry->name << " m " << m << " row " << r;
      }
    }
  }
}

// Argument checks: host-side, no device needed.
TEST(CudaInt4, RefusesBadArguments) {
  alignas(16) static uint8_t buf[64];
  Int4LinearParams p;
  p.x = buf;
  p.out = buf;
  p.w = buf;
  p.scales = buf;
  p.layout = Int4LayoutOf(WeightFormat::Int4(32), 20, 128);
  p.m = 1;
  p.ldx = 128;
  p.ldo = 20;
  EXPECT_EQ(Int4LinearError(Int4Kernel::kMmaGemv, p), nullptr);
  Int4LinearParams q = p;
  q.m = kInt4GemvMaxM + 1;
  EXPECT_NE(Int4LinearError(Int4Kernel::kMmaGemv, q), nullptr);
  EXPECT_EQ(Int4LinearError(Int4Kernel::kMmaGemm, q), nullptr);
  q = p;
  q.x = buf + 2;  // 2-byte aligned
  EXPECT_NE(Int4LinearError(Int4Kernel::kSimt, q), nullptr);
  q.x = buf + 4;  // 4-byte aligned: fine for the GEMV, not the GEMM
  EXPECT_EQ(Int4LinearError(Int4Kernel::kMmaGemv, q), nullptr);
  EXPECT_NE(Int4LinearError(Int4Kernel::kMmaGemm, q), nullptr);
  q = p;
  q.layout.group = 48;
  EXPECT_NE(Int4LinearError(Int4Kernel::kSimt, q), nullptr);
  q = p;
  q.layout.n_pad = 20;
  EXPECT_NE(Int4LinearError(Int4Kernel::kSimt, q), nullptr);
  q = p;
  q.layout.zero_point = true;  // no zero points given
  EXPECT_NE(Int4LinearError(Int4Kernel::kSimt, q), nullptr);
  q = p;
  q.splits = 2;  // no workspace
  EXPECT_NE(Int4LinearError(Int4Kernel::kMmaGemv, q), nullptr);
  q = p;
  q.out_type = DType::kF16;  // neither x's type nor f32
  EXPECT_NE(Int4LinearError(Int4Kernel::kMmaGemv, q), nullptr);
  EXPECT_EQ(LaunchInt4Linear(Int4Kernel::kMmaGemv, q, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace gannet::kernels
