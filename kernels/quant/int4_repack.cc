#include "kernels/quant/int4_repack.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <thread>

namespace gannet::kernels {
namespace {

float Bf16BitsToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float F16BitsToFloat(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);  // subnormal
  } else if (exp == 31) {
    v = mant == 0 ? INFINITY : NAN;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

int CanonicalQ(const WeightFormat& f, const uint8_t* packed, int64_t k, int64_t row, int64_t col) {
  const uint8_t byte = packed[row * (k / 2) + col / 2];
  const int nib = (col & 1) ? byte >> 4 : byte & 0xF;
  return f.elem == DType::kI4 ? (nib >= 8 ? nib - 16 : nib) : nib;
}

}  // namespace

const char* Int4FormatError(const WeightFormat& f, int64_t n, int64_t k) {
  if (const char* e = WeightFormatError(f)) return e;
  if (f.elem != DType::kI4 && f.elem != DType::kU4) return "int4 kernels take kI4 or kU4 elements";
  if (f.elem == DType::kU4 && !f.zero_point) {
    return "kU4 without zero points: express it as kI4 (the values shifted by 8)";
  }
  if (f.elem == DType::kI4 && f.zero_point) return "kI4 takes no zero points";
  if (f.granularity != ScaleGranularity::kGroup) return "int4 kernels take group scales (kGroup)";
  if (f.global_scale) return "int4 kernels take no global scale";
  if (f.scale != DType::kBF16 && f.scale != DType::kF16 && f.scale != DType::kF32) {
    return "int4 scales must be bf16, f16 or f32";
  }
  if (n < 1) return "int4 weight needs at least one output row";
  if (k < kInt4TileK || k % kInt4TileK != 0)
    return "int4 weight K must be a positive multiple of 64";
  if (f.group_size != 32 && f.group_size != 64 && f.group_size != 128 && f.group_size != k) {
    return "int4 group size must be 32, 64, 128 or K (per-channel)";
  }
  if (k % f.group_size != 0) return "int4 weight K must be a multiple of the group size";
  if (n > (int64_t{1} << 30) || k > (int64_t{1} << 30)) return "int4 weight too large";
  return nullptr;
}

Int4Layout Int4LayoutOf(const WeightFormat& f, int64_t n, int64_t k) {
  Int4Layout l;
  l.n = n;
  l.k = k;
  l.n_pad = (n + kInt4RowBlock - 1) / kInt4RowBlock * kInt4RowBlock;
  l.group = f.group_size;
  l.zero_point = f.zero_point;
  l.scale = f.scale;
  return l;
}

Int4NibbleAt Int4DeviceNibble(const Int4Layout& l, int64_t row, int64_t col) {
  const int64_t rb = row / kInt4RowBlock, r = row % kInt4RowBlock;
  const int64_t kt = col / kInt4TileK, c = col % kInt4TileK;
  const int64_t s = c / 16, cs = c % 16;  // k-step, column in the step
  const int g = static_cast<int>(r % 8), hi = static_cast<int>(r / 8);  // row g or g + 8
  const int t = static_cast<int>((cs % 8) / 2), e = static_cast<int>(cs % 2);
  const int p = hi + 2 * static_cast<int>(cs / 8);  // the A register a_p
  const int j = p + 4 * e;                          // nibble of the lane's word s
  const int lane = g * 4 + t;
  const int64_t tile = rb * l.k_tiles() + kt;
  return {tile * kInt4TileBytes + lane * 16 + s * 4 + j / 2, (j % 2) * 4};
}

int64_t Int4DeviceScaleIndex(const Int4Layout& l, int64_t row, int64_t group) {
  const int64_t rb = row / kInt4RowBlock, r = row % kInt4RowBlock;
  return ((rb * l.groups() + group) * 8 + r % 8) * 2 + r / 8;
}

float Int4ScaleToFloat(DType type, const void* scales, int64_t i) {
  switch (type) {
    case DType::kBF16:
      return Bf16BitsToFloat(static_cast<const uint16_t*>(scales)[i]);
    case DType::kF16:
      return F16BitsToFloat(static_cast<const uint16_t*>(scales)[i]);
    case DType::kF32:
      return static_cast<const float*>(scales)[i];
    default:
      return NAN;
  }
}

const char* Int4Repack(const WeightFormat& f, int64_t n, int64_t k, const Int4Canonical& src,
                       Int4Repacked* out, int threads) {
  if (const char* e = Int4FormatError(f, n, k)) return e;
  if (src.packed == nullptr || src.scales == nullptr ||
      (f.zero_point && src.zero_points == nullptr)) {
    return "int4 repack: missing packed bytes, scales or zero points";
  }
  const Int4Layout l = Int4LayoutOf(f, n, k);
  const int64_t groups = l.groups();
  if (f.zero_point) {
    for (int64_t i = 0; i < n * groups; ++i) {
      if (src.zero_points[i] > 15) return "zero point out of range";
    }
  }
  out->layout = l;
  // Padding rows: u = 8 for kI4 (value 0), u = 0 with zero point 0 for kU4; scales 0.
  out->packed.assign(static_cast<size_t>(l.packed_bytes()), f.zero_point ? 0x00 : 0x88);
  const int sbytes = DTypeBits(f.scale) / 8;
  out->scales.assign(static_cast<size_t>(l.scale_bytes()), 0);
  out->zero_points.assign(static_cast<size_t>(l.zero_point_bytes()), 0);
  auto rows = [&](int64_t row0, int64_t row1) {
    for (int64_t row = row0; row < row1; ++row) {
      const uint8_t* in = src.packed + row * (k / 2);
      for (int64_t col = 0; col < k; ++col) {
        const int nib = (col & 1) ? in[col / 2] >> 4 : in[col / 2] & 0xF;
        const int u = f.elem == DType::kI4 ? nib ^ 0x8 : nib;
        const Int4NibbleAt at = Int4DeviceNibble(l, row, col);
        uint8_t& b = out->packed[static_cast<size_t>(at.byte)];
        b = static_cast<uint8_t>((b & ~(0xF << at.shift)) | (u << at.shift));
      }
      for (int64_t grp = 0; grp < groups; ++grp) {
        const int64_t dst = Int4DeviceScaleIndex(l, row, grp);
        std::memcpy(&out->scales[static_cast<size_t>(dst * sbytes)],
                    static_cast<const uint8_t*>(src.scales) + (row * groups + grp) * sbytes,
                    sbytes);
        if (f.zero_point)
          out->zero_points[static_cast<size_t>(dst)] = src.zero_points[row * groups + grp];
      }
    }
  };
  // Row blocks own disjoint tiles, scales and zero points (a byte holds rows g and g + 8 of one
  // block), so threads take whole row blocks and write the same buffers without a lock.
  const int64_t blocks = l.row_blocks();
  const int64_t parts = std::clamp<int64_t>(threads, 1, blocks);
  std::vector<std::thread> pool;
  for (int64_t p = 1; p < parts; ++p) {
    pool.emplace_back(rows, std::min(n, blocks * p / parts * kInt4RowBlock),
                      std::min(n, blocks * (p + 1) / parts * kInt4RowBlock));
  }
  rows(0, std::min(n, blocks / parts * kInt4RowBlock));
  for (std::thread& t : pool) t.join();
  return nullptr;
}

void Int4DequantizeCanonical(const WeightFormat& f, int64_t n, int64_t k, const Int4Canonical& src,
                             float* w) {
  const int64_t groups = k / f.group_size;
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t col = 0; col < k; ++col) {
      const int64_t gi = row * groups + col / f.group_size;
      const int zp = f.zero_point ? src.zero_points[gi] : 0;
      const float s = Int4ScaleToFloat(f.scale, src.scales, gi);
      w[row * k + col] = static_cast<float>(CanonicalQ(f, src.packed, k, row, col) - zp) * s;
    }
  }
}

void Int4DequantizeRepacked(const Int4Layout& l, const uint8_t* packed, const void* scales,
                            const uint8_t* zero_points, float* w) {
  for (int64_t row = 0; row < l.n; ++row) {
    for (int64_t col = 0; col < l.k; ++col) {
      const Int4NibbleAt at = Int4DeviceNibble(l, row, col);
      const int u = (packed[at.byte] >> at.shift) & 0xF;
      const int64_t si = Int4DeviceScaleIndex(l, row, col / l.group);
      const int zp = l.zero_point ? zero_points[si] : kInt4SignedZero;
      w[row * l.k + col] = static_cast<float>(u - zp) * Int4ScaleToFloat(l.scale, scales, si);
    }
  }
}

}  // namespace gannet::kernels
