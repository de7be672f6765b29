// Helpers for the GPU backend tests: skipping without a device, moving host f32 data in and out
// of CudaBackend tensors (bf16 conversion included), and error metrics.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/common/dtype.h"

namespace gannet::testing {

inline bool CudaDeviceAvailable() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Every GPU test starts with this: CI builds these binaries on machines without a GPU.
#define GANNET_REQUIRE_GPU()                                                         \
  do {                                                                               \
    if (!::gannet::testing::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

struct DeviceTensor {
  backend::Buffer buf;
  backend::Tensor t;
};

// Uploads host floats as `dt` (bf16 and f16 round to nearest even; i32 casts) into a new device
// tensor.
inline DeviceTensor Upload(backend::Backend& be, const std::vector<float>& host, DType dt,
                           std::initializer_list<int64_t> dims) {
  DeviceTensor d;
  const size_t eb = DTypeBits(dt) / 8;
  auto buf = be.Allocate(host.size() * eb);
  EXPECT_TRUE(buf.ok()) << buf.status();
  d.buf = std::move(*buf);
  d.t = d.buf.View(dt, dims);
  std::vector<char> bytes(host.size() * eb);
  for (size_t i = 0; i < host.size(); ++i) {
    if (dt == DType::kBF16 || dt == DType::kF16) {
      const uint16_t b = dt == DType::kBF16 ? FloatToBf16(host[i]) : FloatToF16(host[i]);
      std::memcpy(&bytes[i * 2], &b, 2);
    } else if (dt == DType::kI32) {
      const int32_t v = static_cast<int32_t>(host[i]);
      std::memcpy(&bytes[i * 4], &v, 4);
    } else {
      std::memcpy(&bytes[i * 4], &host[i], 4);
    }
  }
  EXPECT_TRUE(be.CopyToDevice(d.buf.data(), bytes.data(), bytes.size()).ok());
  return d;
}

// Raw bytes (FP8 caches) into a new device tensor of type `dt`.
inline DeviceTensor UploadBytes(backend::Backend& be, const std::vector<uint8_t>& host, DType dt,
                                std::initializer_list<int64_t> dims) {
  DeviceTensor d;
  auto buf = be.Allocate(host.size());
  EXPECT_TRUE(buf.ok()) << buf.status();
  d.buf = std::move(*buf);
  d.t = d.buf.View(dt, dims);
  EXPECT_TRUE(be.CopyToDevice(d.buf.data(), host.data(), host.size()).ok());
  return d;
}

inline DeviceTensor UploadI32(backend::Backend& be, const std::vector<int32_t>& host,
                              std::initializer_list<int64_t> dims) {
  DeviceTensor d;
  auto buf = be.Allocate(host.size() * 4);
  EXPECT_TRUE(buf.ok()) << buf.status();
  d.buf = std::move(*buf);
  d.t = d.buf.View(DType::kI32, dims);
  EXPECT_TRUE(be.CopyToDevice(d.buf.data(), host.data(), host.size() * 4).ok());
  return d;
}

// A contiguous device tensor back as f32 (bf16 and f16 widened, i32 cast).
inline std::vector<float> Download(backend::Backend& be, const backend::Tensor& t) {
  const int64_t n = t.numel();
  std::vector<char> bytes(static_cast<size_t>(n) * t.elem_bytes());
  EXPECT_TRUE(be.CopyToHost(bytes.data(), t.data, bytes.size()).ok());
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    if (t.dtype == DType::kBF16 || t.dtype == DType::kF16) {
      uint16_t b;
      std::memcpy(&b, &bytes[i * 2], 2);
      out[i] = t.dtype == DType::kBF16 ? Bf16ToFloat(b) : F16ToFloat(b);
    } else if (t.dtype == DType::kI32) {
      int32_t v;
      std::memcpy(&v, &bytes[i * 4], 4);
      out[i] = static_cast<float>(v);
    } else {
      std::memcpy(&out[i], &bytes[i * 4], 4);
    }
  }
  return out;
}

inline std::vector<float> RandomNormal(size_t n, uint32_t seed, float scale = 1.0f,
                                       bool bf16 = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = bf16 ? RoundToBf16(nd(rng)) : nd(rng);
  return v;
}

// ||a - b|| / ||b||; NaN anywhere in a gives +inf so no comparison can pass it.
inline double RelL2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return m;
}

}  // namespace gannet::testing
