// Scalar helpers shared by the CPU backend's op files (internal to backend/cpu).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "lib/backend/tensor.h"
#include "lib/common/dtype.h"
#include "lib/common/status.h"

namespace gannet::backend::cpu {

// Element i of a weight tensor of any supported float type, as f32.
inline float LoadF32(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kBF16:
      return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16:
      return F16ToFloat(static_cast<const uint16_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// Row `row` of the weight `w` (rows of k elements; a 3-D [E, R, k] weight has E * R rows) as
// f32: plain types converted, int4 dequantized from the canonical bytes (lib/quant/int4.h).
// The caller checked the format with RequireReadableWeight.
void WeightRowToF32(const Tensor& w, int64_t row, int64_t k, float* out);
// The activation scale row `row` of `w` quantizes its input with: the static FP8 scale or the
// NVFP4 input global scale; 0 for dynamic FP8 (computed from x) and weight-only formats.
float InputScaleOf(const Tensor& w, int64_t row);
// x (k values) quantized and dequantized as format `f`'s activation scheme says, with `scale`
// from InputScaleOf.
void QuantizeInput(const WeightFormat& f, float scale, const float* x, int64_t k, float* out);

// The input of a product with row `row` of weight `w` as the weight's scheme has it: x itself
// (weight-only formats), or x quantized to FP8 and back (lib/quant/fp8.h), with the row's
// static scale or per-token dynamic ones. Kept until x's pointer or the scale changes: call
// Reset when a buffer passed as x is rewritten.
class ActivationRow {
 public:
  const float* Get(const Tensor& w, int64_t row, const float* x, int64_t k);
  void Reset() { valid_ = false; }

 private:
  std::vector<float> buf_;
  bool valid_ = false;
  const float* x_ = nullptr;
  float scale_ = 0.f;
};

// OK for plain weights and the int4 and FP8 formats WeightRowToF32 reads; else InvalidArgument
// naming `what` and the format.
absl::Status RequireReadableWeight(const Tensor& w, const char* what);
// OK for plain (unquantized) weights only: ops that read tables by element (embeddings, gathers).
absl::Status RequireDenseWeight(const Tensor& w, const char* what);

// Dot product of two f32 vectors (several accumulators, vectorizable).
float Dot(const float* a, const float* b, int64_t n);

inline float GeluTanh(float x) {
  // torch.nn.functional.gelu(x, approximate="tanh"), evaluated in f32 as PyTorch does.
  const float kAlpha = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(kAlpha * (x + 0.044715f * x * x * x)));
}

// x / sqrt(mean(x^2) + eps) as HF's Gemma4RMSNorm (torch.pow(mean + eps, -0.5)).
inline float RmsInvScale(const float* x, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  float mean = static_cast<float>(ss / static_cast<double>(n));
  return std::pow(mean + eps, -0.5f);
}

inline absl::Status RequireF32(const Tensor& t, const char* what) {
  if (t.dtype != DType::kF32) {
    return InvalidArgumentError("cpu backend: {} must be f32, got {}", what, DTypeName(t.dtype));
  }
  return absl::OkStatus();
}

}  // namespace gannet::backend::cpu
