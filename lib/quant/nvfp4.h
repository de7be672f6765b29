// NVFP4 weights (compressed-tensors `nvfp4-pack-quantized`) in memory, and the FP4 activation
// quantization of its W4A4 scheme (docs/quantized-formats.md §6).
//
// A weight [N, K] (K a multiple of 16) is
//   elements  uint8 [N, K/2]: two FP4 E2M1 values per byte, element k in byte k/2, the low nibble
//             holding even k; a nibble is sign (bit 3) and magnitude index 0..7 of
//             {0, 0.5, 1, 1.5, 2, 3, 4, 6}
//   scales    FP8 E4M3 [N, K/16], one per 16 inputs of a row, as stored
//   global    f32 per row: its module's weight_global_scale (compressed-tensors divides by it)
//   value     bf16(e2m1 * (e4m3(scale) / global)), computed in f32 and rounded to bf16 as
//             compressed-tensors' decompression does (it unpacks to bf16)
#pragma once

#include <cstdint>

#include "lib/common/dtype.h"

namespace gannet::quant {

inline constexpr int kNvfp4Group = 16;
inline constexpr float kFp4E2M1Max = 6.0f;

float Fp4E2M1ToFloat(uint8_t nibble);
// Round to nearest even E2M1 (values past +-6 saturate), as compressed-tensors' cast_to_fp4.
uint8_t FloatToFp4E2M1(float f);

void DequantizeNvfp4Row(const uint8_t* packed_row, const uint8_t* scales, float global, int64_t k,
                        float* out);

// compressed-tensors' W4A4 forward on x (k values, k a multiple of 16): per group of 16, scale =
// e4m3(input_global * amax / 6) (0 becomes 0.125, FP8's epsilon there), effective = scale /
// input_global, x' = e2m1(clamp(x / effective, -6, 6)) * effective.
void FakeQuantizeNvfp4Activations(float input_global, const float* x, int64_t k, float* out);

// Round-to-nearest NVFP4 of `rows` f32 rows of k values (of `value_type`), as compressed-tensors'
// observers do it: global = 448 * 6 / amax(all rows) rounded to value_type; per group of 16,
// scale = e4m3(global * round_to_value_type(amax / 6)) (0 becomes 0.125); element =
// e2m1(w / (scale / global)). Returns the global scale.
float QuantizeNvfp4Rows(DType value_type, const float* w, int64_t rows, int64_t k, uint8_t* packed,
                        uint8_t* scales);

}  // namespace gannet::quant
