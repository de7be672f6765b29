// PNG through libpng. libpng reports errors by longjmp; the jumps stay inside the two small
// functions below that call setjmp (ReadHeader, ReadPixels), whose locals are plain values, so
// no C++ destructor is ever skipped. Everything owning memory lives in DecodePng, outside them.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "lib/vision/image_codecs.h"
#include "lib/vision/image_error.h"

namespace gannet::vision::internal {
namespace {

// Shared with libpng's callbacks; plain data only.
struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
  bool truncated;
  char message[160];
};

void ReadData(png_structp png, png_bytep out, size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) {
    src->truncated = true;
    png_error(png, "unexpected end of data");
  }
  std::memcpy(out, src->data + src->pos, n);
  src->pos += n;
}

void OnError(png_structp png, png_const_charp message) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof(src->message), "%s", message);
  png_longjmp(png, 1);
}

void OnWarning(png_structp, png_const_charp) {}

struct PngHeader {
  png_uint_32 width;
  png_uint_32 height;
  int bit_depth;
  int color_type;
};

bool ReadHeader(png_structp png, png_infop info, PngHeader* h) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  int interlace = 0;
  png_get_IHDR(png, info, &h->width, &h->height, &h->bit_depth, &h->color_type, &interlace, nullptr,
               nullptr);
  return true;
}

// Sets the conversions to 8-bit RGB (16-bit grey is left as it is) and reads every row (all passes
// of an interlaced image) into `out`, `row_bytes` per row. *row_bytes_seen is libpng's own count,
// compared by the caller with what it allocated.
bool ReadPixels(png_structp png, png_infop info, const PngHeader* h, bool keep_grey16, uint8_t* out,
                size_t row_bytes, size_t* row_bytes_seen) {
  if (setjmp(png_jmpbuf(png))) return false;
  if (h->color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (h->color_type == PNG_COLOR_TYPE_GRAY && h->bit_depth < 8) {
    png_set_expand_gray_1_2_4_to_8(png);
  }
  if (!keep_grey16) {
    png_set_strip_16(png);  // the high byte, as PIL's 16-bit raw modes keep
    png_set_gray_to_rgb(png);
    // PIL's convert("RGB") drops alpha; a tRNS entry (which libpng's palette expansion turns
    // into alpha) is ignored the same way.
    png_set_strip_alpha(png);
  }
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  *row_bytes_seen = png_get_rowbytes(png, info);
  if (*row_bytes_seen != row_bytes) return true;  // the caller reports the mismatch
  for (int pass = 0; pass < passes; ++pass) {
    for (png_uint_32 y = 0; y < h->height; ++y) png_read_row(png, out + y * row_bytes, nullptr);
  }
  return true;
}

struct PngHandles {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngHandles() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

}  // namespace

absl::StatusOr<RgbImage> DecodePng(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  PngSource src{bytes.data(), bytes.size(), 0, false, {}};
  PngHandles h;
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, OnError, OnWarning);
  if (h.png == nullptr) return absl::ResourceExhaustedError("image: libpng could not start");
  h.info = png_create_info_struct(h.png);
  if (h.info == nullptr) return absl::ResourceExhaustedError("image: libpng could not start");
  png_set_read_fn(h.png, &src, ReadData);
  // Never let a chunk (text, ICC profile) allocate more than the image limit allows.
  png_set_chunk_malloc_max(h.png, 8u << 20);

  auto failure = [&](const char* stage) {
    return ImageError(src.truncated ? ImageErrorKind::kTruncated : ImageErrorKind::kCorrupt,
                      "PNG {}: {}", stage, src.message);
  };
  PngHeader header{};
  if (!ReadHeader(h.png, h.info, &header)) return failure("header");
  GANNET_RETURN_IF_ERROR(CheckDimensions(header.width, header.height, limits, "PNG"));

  // 16-bit grey stays 16-bit here and is clipped below (PIL's I;16 -> RGB).
  const bool grey16 = header.color_type == PNG_COLOR_TYPE_GRAY && header.bit_depth == 16;
  const size_t row_bytes = static_cast<size_t>(header.width) * (grey16 ? 2 : 3);
  std::vector<uint8_t> raw(row_bytes * header.height);
  size_t row_bytes_seen = 0;
  if (!ReadPixels(h.png, h.info, &header, grey16, raw.data(), row_bytes, &row_bytes_seen)) {
    return failure("data");
  }
  if (row_bytes_seen != row_bytes) {
    return ImageError(ImageErrorKind::kUnsupported,
                      "PNG colour type {} bit depth {} gives {} "
                      "bytes per row, expected {}",
                      header.color_type, header.bit_depth, row_bytes_seen, row_bytes);
  }
  RgbImage image;
  image.width = static_cast<int>(header.width);
  image.height = static_cast<int>(header.height);
  if (grey16) {
    const size_t n = static_cast<size_t>(image.width) * image.height;
    image.pixels.resize(n * 3);
    for (size_t i = 0; i < n; ++i) {
      const unsigned v = (unsigned{raw[2 * i]} << 8) | raw[2 * i + 1];
      const uint8_t c = static_cast<uint8_t>(v > 255 ? 255 : v);
      image.pixels[3 * i] = image.pixels[3 * i + 1] = image.pixels[3 * i + 2] = c;
    }
    return image;
  }
  image.pixels = std::move(raw);
  return image;
}

}  // namespace gannet::vision::internal
