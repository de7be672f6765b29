// JPEG through libjpeg(-turbo). libjpeg reports fatal errors through error_exit, which here
// longjmps back into ReadHeader or ReadPixels: both hold only plain values, so no C++ destructor
// is skipped. Premature end of data is an error (libjpeg's default would pad the image with grey
// and warn; PIL refuses such a file as truncated). Warnings are ignored, as PIL does.
//
// Decoding settings are libjpeg's defaults, which PIL also keeps: the accurate integer IDCT
// (JDCT_ISLOW) and "fancy" (triangle-filter) chroma upsampling.
// jpeglib.h uses size_t and FILE without including their headers.
#include <cstddef>
#include <cstdio>
// clang-format off
#include <jpeglib.h>
// clang-format on

#include <csetjmp>
#include <cstring>
#include <vector>

#include "lib/vision/image_codecs.h"
#include "lib/vision/image_error.h"

namespace gannet::vision::internal {
namespace {

struct JpegErrors {
  jpeg_error_mgr mgr;  // first: libjpeg hands back a pointer to it
  std::jmp_buf jump;
  bool truncated;
  char message[JMSG_LENGTH_MAX];
};

void OnErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void OnMessage(j_common_ptr, int) {}

// Bounds on what a hostile file can make libjpeg spend, beyond the pixel limit checked after the
// header: a progressive file may carry any number of scans, each a pass over the whole image
// (real encoders write about 10), and the whole-image coefficient buffer of a progressive file
// at the pixel limit is 2^26 * 3 components * 2 bytes = 384 MiB.
constexpr int kMaxScans = 1000;
constexpr long kMaxJpegMemory = 1L << 30;

void OnProgress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  if (reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number <= kMaxScans) return;
  auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
  std::snprintf(err->message, sizeof(err->message), "more than %d scans", kMaxScans);
  std::longjmp(err->jump, 1);
}

// A source over the caller's bytes that fails at their end instead of inventing an EOI marker.
struct JpegSource {
  jpeg_source_mgr mgr;  // first
  const uint8_t* data;
  size_t size;
};

void InitSource(j_decompress_ptr) {}

boolean FillInput(j_decompress_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
  err->truncated = true;
  std::snprintf(err->message, sizeof(err->message), "unexpected end of data");
  std::longjmp(err->jump, 1);
}

void SkipInput(j_decompress_ptr cinfo, long n) {
  if (n <= 0) return;
  jpeg_source_mgr* src = cinfo->src;
  if (static_cast<size_t>(n) > src->bytes_in_buffer) FillInput(cinfo);
  src->next_input_byte += n;
  src->bytes_in_buffer -= static_cast<size_t>(n);
}

void TermSource(j_decompress_ptr) {}

// jpeg_create_decompress fails only by error_exit (a library/header version mismatch).
bool Create(jpeg_decompress_struct* cinfo, JpegErrors* err) {
  if (setjmp(err->jump)) return false;
  jpeg_create_decompress(cinfo);
  return true;
}

struct JpegHeader {
  JDIMENSION width;
  JDIMENSION height;
  J_COLOR_SPACE color_space;
};

bool ReadHeader(jpeg_decompress_struct* cinfo, JpegErrors* err, JpegHeader* h) {
  if (setjmp(err->jump)) return false;
  jpeg_read_header(cinfo, TRUE);
  h->width = cinfo->image_width;
  h->height = cinfo->image_height;
  h->color_space = cinfo->jpeg_color_space;
  return true;
}

// Decodes into `out` (height rows of width * channels bytes).
bool ReadPixels(jpeg_decompress_struct* cinfo, JpegErrors* err, bool grey, uint8_t* out,
                size_t row_bytes) {
  if (setjmp(err->jump)) return false;
  cinfo->out_color_space = grey ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(cinfo);
  if (static_cast<size_t>(cinfo->output_width) * cinfo->output_components != row_bytes) {
    std::snprintf(err->message, sizeof(err->message), "unexpected output geometry");
    return false;
  }
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = out + static_cast<size_t>(cinfo->output_scanline) * row_bytes;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  return true;
}

struct JpegHandle {
  jpeg_decompress_struct cinfo;
  bool created = false;
  ~JpegHandle() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

}  // namespace

absl::StatusOr<RgbImage> DecodeJpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  JpegErrors err{};
  JpegSource src{};
  JpegHandle h;
  std::memset(&h.cinfo, 0, sizeof(h.cinfo));
  h.cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = OnErrorExit;
  err.mgr.emit_message = OnMessage;
  if (!Create(&h.cinfo, &err)) {
    return absl::InternalError(fmt::format("image: libjpeg could not start: {}", err.message));
  }
  h.created = true;
  h.cinfo.mem->max_memory_to_use = kMaxJpegMemory;  // above it libjpeg fails, it never spills
  jpeg_progress_mgr progress{};
  progress.progress_monitor = OnProgress;
  h.cinfo.progress = &progress;
  src.mgr.init_source = InitSource;
  src.mgr.fill_input_buffer = FillInput;
  src.mgr.skip_input_data = SkipInput;
  src.mgr.resync_to_restart = jpeg_resync_to_restart;
  src.mgr.term_source = TermSource;
  src.mgr.next_input_byte = bytes.data();
  src.mgr.bytes_in_buffer = bytes.size();
  h.cinfo.src = &src.mgr;
  // Markers we do not read (EXIF, ICC) are skipped, not kept in memory.

  auto failure = [&](const char* stage) {
    return ImageError(err.truncated ? ImageErrorKind::kTruncated : ImageErrorKind::kCorrupt,
                      "JPEG {}: {}", stage, err.message);
  };
  JpegHeader header{};
  if (!ReadHeader(&h.cinfo, &err, &header)) return failure("header");
  GANNET_RETURN_IF_ERROR(CheckDimensions(header.width, header.height, limits, "JPEG"));
  if (header.color_space == JCS_CMYK || header.color_space == JCS_YCCK) {
    return ImageError(ImageErrorKind::kUnsupported, "CMYK JPEG images are not supported");
  }
  const bool grey = header.color_space == JCS_GRAYSCALE;
  const int channels = grey ? 1 : 3;
  const size_t row_bytes = static_cast<size_t>(header.width) * channels;
  std::vector<uint8_t> raw(row_bytes * header.height);
  if (!ReadPixels(&h.cinfo, &err, grey, raw.data(), row_bytes)) return failure("data");

  RgbImage image;
  image.width = static_cast<int>(header.width);
  image.height = static_cast<int>(header.height);
  if (!grey) {
    image.pixels = std::move(raw);
    return image;
  }
  const size_t n = static_cast<size_t>(image.width) * image.height;
  image.pixels.resize(n * 3);
  for (size_t i = 0; i < n; ++i) {
    image.pixels[3 * i] = image.pixels[3 * i + 1] = image.pixels[3 * i + 2] = raw[i];
  }
  return image;
}

}  // namespace gannet::vision::internal
