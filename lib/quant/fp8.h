// FP8 E4M3 weights (compressed-tensors `float-quantized`) in their in-memory form, and FP8
// activation quantization as the checkpoint's scheme asks for it (docs/quantized-formats.md).
//
// In memory (what a backend's LoadWeight produces and the CPU reads) a weight [N, K] is
//   elements  uint8 [N, K], the checkpoint's E4M3 bytes as stored
//   scales    f32, one per row ({kChannel}: per-channel weights, and per-tensor ones, each row
//             holding its module's scale, so fused and per-expert weights of several modules stay
//             one tensor) or one per row per 128 inputs ({kBlock, block_rows 1, group_size 128}:
//             128x128 block weights, each row holding its block row's scales, the last group of a
//             row shorter when 128 does not divide K)
//   inputs    f32 [N] (kStaticFp8 only): each row's module's input_scale
//   value     e4m3(byte) * scale, in f32
#pragma once

#include <cstdint>

#include "lib/common/dtype.h"

namespace gannet::quant {

// The in-memory format of a checkpoint's FP8 format (activation scheme kept, scales f32).
WeightFormat Fp8InMemoryFormat(const WeightFormat& checkpoint);
// f32 scales per in-memory row: 1, or ceil(k / group_size) for blocks.
int64_t Fp8ScalesPerRow(const WeightFormat& in_memory, int64_t k);

// The values of one in-memory row of k elements; `scales` points at the row's first scale.
void DequantizeFp8Row(const WeightFormat& in_memory, const uint8_t* row, const float* scales,
                      int64_t k, float* out);

// x (k values) as compressed-tensors' forward sees it before the product (quantize, then
// dequantize: "fake quantization"): each group of `group` values (0: all k; the last group may be
// shorter) gets the scale amax / 448 (kDynamicFp8; an all-zero group f32 epsilon) or
// `static_scale` (kStaticFp8), and becomes e4m3(clamp(x / scale, -448, 448)) * scale.
void FakeQuantizeFp8Activations(ActivationQuant act, int group, float static_scale, const float* x,
                                int64_t k, float* out);

// Round-to-nearest FP8 quantization of `rows` f32 rows of k elements (values of `value_type`, the
// checkpoint's bf16/f16/f32) as compressed-tensors' observer and compressor do it: scale =
// amax / 448 over a row (kChannel), the whole tensor (kTensor) or a block (kBlock,
// f.block_rows x f.group_size), rounded to f.scale (an all-zero group gets that type's epsilon);
// element = e4m3(clamp(round_to_value_type(w / scale), -448, 448)). Scales are written in
// f.scale: [rows] (channel), [1] (tensor), [ceil(rows/br), ceil(k/bc)] (blocks).
void QuantizeFp8Rows(const WeightFormat& f, DType value_type, const float* w, int64_t rows,
                     int64_t k, uint8_t* out, void* scales);

}  // namespace gannet::quant
