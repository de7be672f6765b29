#include "lib/quant/fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lib/quant/int4.h"

namespace gannet::quant {
namespace {

// torch.finfo(t).eps: what compressed-tensors puts in place of a zero scale.
float Epsilon(DType t) {
  switch (t) {
    case DType::kBF16:
      return 0.0078125f;
    case DType::kF16:
      return 0.0009765625f;
    default:
      return std::numeric_limits<float>::epsilon();
  }
}

float FakeQuantize(float x, float scale) {
  const float v = std::clamp(x / scale, -kFp8E4M3Max, kFp8E4M3Max);
  return Fp8E4M3ToFloat(FloatToFp8E4M3(v)) * scale;
}

}  // namespace

WeightFormat Fp8InMemoryFormat(const WeightFormat& c) {
  WeightFormat f = c.granularity == ScaleGranularity::kBlock
                       ? WeightFormat::Fp8Block(1, c.group_size)
                       : WeightFormat::Fp8Channel();
  f.act = c.act;
  f.act_group = c.act_group;
  return f;
}

int64_t Fp8ScalesPerRow(const WeightFormat& f, int64_t k) {
  return f.granularity == ScaleGranularity::kBlock ? (k + f.group_size - 1) / f.group_size : 1;
}

void DequantizeFp8Row(const WeightFormat& f, const uint8_t* row, const float* scales, int64_t k,
                      float* out) {
  const int64_t g = f.granularity == ScaleGranularity::kBlock ? f.group_size : k;
  for (int64_t g0 = 0, gi = 0; g0 < k; g0 += g, ++gi) {
    const float s = scales[gi];
    const int64_t end = std::min(k, g0 + g);
    for (int64_t i = g0; i < end; ++i) out[i] = Fp8E4M3ToFloat(row[i]) * s;
  }
}

void FakeQuantizeFp8Activations(ActivationQuant act, int group, float static_scale, const float* x,
                                int64_t k, float* out) {
  const int64_t g = group > 0 ? group : k;
  for (int64_t g0 = 0; g0 < k; g0 += g) {
    const int64_t end = std::min(k, g0 + g);
    float scale = static_scale;
    if (act == ActivationQuant::kDynamicFp8) {
      float amax = 0.f;
      for (int64_t i = g0; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
      scale = amax / kFp8E4M3Max;
      if (scale == 0.f) scale = std::numeric_limits<float>::epsilon();
    }
    for (int64_t i = g0; i < end; ++i) out[i] = FakeQuantize(x[i], scale);
  }
}

void QuantizeFp8Rows(const WeightFormat& f, DType value_type, const float* w, int64_t rows,
                     int64_t k, uint8_t* out, void* scales) {
  const bool block = f.granularity == ScaleGranularity::kBlock;
  const int64_t br = block ? f.block_rows : f.granularity == ScaleGranularity::kTensor ? rows : 1;
  const int64_t bc = block ? f.group_size : k;
  const int64_t col_blocks = (k + bc - 1) / bc;
  for (int64_t r0 = 0, bi = 0; r0 < rows; r0 += br, ++bi) {
    const int64_t r1 = std::min(rows, r0 + br);
    for (int64_t c0 = 0, bj = 0; c0 < k; c0 += bc, ++bj) {
      const int64_t c1 = std::min(k, c0 + bc);
      float amax = 0.f;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * k + c]));
      }
      float scale = RoundToFloatType(amax / kFp8E4M3Max, f.scale);
      if (scale == 0.f) scale = Epsilon(f.scale);
      StoreScale(scales, f.scale, bi * col_blocks + bj, scale);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) {
          const float v = std::clamp(RoundToFloatType(w[r * k + c] / scale, value_type),
                                     -kFp8E4M3Max, kFp8E4M3Max);
          out[r * k + c] = FloatToFp8E4M3(v);
        }
      }
    }
  }
}

}  // namespace gannet::quant
