// Host-side int4 W4A16 helpers: the checks on a canonical int4 weight (the loader's form, see
// int4_layout.h), its repacking into the device layout, and the CPU reference that dequantizes
// either form to f32 (the oracle of the kernels' tests). Plain C++, no CUDA: the CPU build and its
// tests use them, and the CUDA backend calls Int4Repack once per weight at load time.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/dtype.h"
#include "kernels/quant/int4_layout.h"

namespace gannet::kernels {

// The loader's form: packed [n, k / 2] (element k in byte k / 2, low nibble for even k; kI4 two's
// complement, kU4 unsigned), scales [n, k / group] of format.scale, zero points [n, k / group]
// bytes (kU4 with zero_point only; each in 0..15). value = (q - zero point) * scale.
struct Int4Canonical {
  const uint8_t* packed = nullptr;
  const void* scales = nullptr;
  const uint8_t* zero_points = nullptr;
};

// The device form (int4_layout.h) in host memory, ready to copy.
struct Int4Repacked {
  Int4Layout layout;
  std::vector<uint8_t> packed;       // layout.packed_bytes()
  std::vector<uint8_t> scales;       // layout.scale_bytes()
  std::vector<uint8_t> zero_points;  // layout.zero_point_bytes() (empty for kI4)
};

// nullptr when the kernels take `format` for an [n, k] weight, else what is wrong: elements kI4,
// or kU4 with zero points (a kU4 without zero points is a kI4 shifted by 8: the loader says so);
// kGroup scales of bf16, f16 or f32; group 32, 64, 128 or k (per-channel; a kChannel format is
// the caller's to express as group = k); k a positive multiple of 64 and of the group; n >= 1.
const char* Int4FormatError(const WeightFormat& format, int64_t n, int64_t k);

// The layout Int4Repack produces for a weight Int4FormatError accepts.
Int4Layout Int4LayoutOf(const WeightFormat& format, int64_t n, int64_t k);

// Repacks the canonical form (every pointer required; zero_points only with format.zero_point)
// into the device form, on `threads` threads (whole row blocks each; the bytes do not depend on
// it: ~8 ns an element on one thread, minutes for a 31B checkpoint). Returns nullptr, or
// Int4FormatError's reason (nothing written), or "zero point out of range" for a zero point
// above 15.
const char* Int4Repack(const WeightFormat& format, int64_t n, int64_t k, const Int4Canonical& src,
                       Int4Repacked* out, int threads = 1);

// The reference: w[n, k] in f32, (q - zero point) * scale with the scale converted to f32.
void Int4DequantizeCanonical(const WeightFormat& format, int64_t n, int64_t k,
                             const Int4Canonical& src, float* w);
// The same values read back from the device form (rows < layout.n only): equal to the canonical
// dequantization bit for bit when the repack is right.
void Int4DequantizeRepacked(const Int4Layout& layout, const uint8_t* packed, const void* scales,
                            const uint8_t* zero_points, float* w);

// Where element (row, col) of a weight lives in the device form: the byte of its tile and the
// nibble (0 = low) in that byte. The one statement of the layout's map, shared by repack and
// read-back.
struct Int4NibbleAt {
  int64_t byte;
  int shift;  // 0 or 4
};
Int4NibbleAt Int4DeviceNibble(const Int4Layout& layout, int64_t row, int64_t col);
// Index (in scale elements, or zero-point bytes) of the scale of (row, group) in the device form.
int64_t Int4DeviceScaleIndex(const Int4Layout& layout, int64_t row, int64_t group);

// Scale element (of `type`: bf16, f16 or f32) at `index` of `scales`, as f32.
float Int4ScaleToFloat(DType type, const void* scales, int64_t index);

}  // namespace gannet::kernels
