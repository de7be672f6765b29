// gannet-quantize (`gannet quantize`): writes a compressed-tensors int4 (W4A16) or FP8 checkpoint
// from a bf16 one (lib/model/quantize_checkpoint.h; docs/quantized-formats.md).
//
//   gannet quantize SRC_DIR DST_DIR [--weight-dtype
//   int4-g32|int4-g64|int4-g128|int4-channel[-asym]|fp8-channel|fp8-block|fp8-tensor|nvfp4]
#include <cstdio>
#include <cstring>
#include <string>

#include "fmt/format.h"
#include "lib/common/units.h"
#include "lib/model/quantize_checkpoint.h"

namespace {

constexpr char kUsage[] =
    "usage: gannet quantize SRC_DIR DST_DIR [--weight-dtype SPEC]\n"
    "\n"
    "Writes DST_DIR: SRC_DIR's bf16 Gemma-4 checkpoint with its Linear layers in int4\n"
    "(compressed-tensors pack-quantized W4A16, round to nearest), config.json's\n"
    "quantization_config saying so, and every other file copied. The LM head, router,\n"
    "embeddings, PLE model projection and vision/audio towers stay as they are.\n"
    "\n"
    "  --weight-dtype SPEC  int4-g32 (default), int4-g64, int4-g128 or int4-channel;\n"
    "                       append -asym for zero points (asymmetric); or FP8 E4M3\n"
    "                       (compressed-tensors float-quantized, FP8 activations):\n"
    "                       fp8-channel (FP8_DYNAMIC), fp8-block (FP8_BLOCK, 128x128),\n"
    "                       fp8-tensor (one scale per layer); or nvfp4 (NVFP4A16:\n"
    "                       compressed-tensors nvfp4-pack-quantized, weight-only)\n";

}  // namespace

int main(int argc, char** argv) {
  std::string src, dst, spec = "int4-g32";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--weight-dtype" && i + 1 < argc) {
      spec = argv[++i];
    } else if (a.rfind("--weight-dtype=", 0) == 0) {
      spec = a.substr(15);
    } else if (!a.empty() && a[0] != '-' && src.empty()) {
      src = a;
    } else if (!a.empty() && a[0] != '-' && dst.empty()) {
      dst = a;
    } else {
      std::fprintf(stderr, "gannet quantize: unexpected argument '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (src.empty() || dst.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  auto options = gannet::model::ParseWeightDtype(spec);
  if (!options.ok()) {
    std::fprintf(stderr, "gannet quantize: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  auto report = gannet::model::QuantizeCheckpoint(src, dst, *options);
  if (!report.ok()) {
    std::fprintf(stderr, "gannet quantize: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  std::printf("wrote %s (%s): %lld modules quantized, %lld kept; %s -> %s\n", dst.c_str(),
              spec.c_str(), static_cast<long long>(report->quantized_modules),
              static_cast<long long>(report->kept_modules),
              gannet::FormatBytes(static_cast<int64_t>(report->bytes_in)).c_str(),
              gannet::FormatBytes(static_cast<int64_t>(report->bytes_out)).c_str());
  std::printf("kept as they were (quantization_config.ignore):");
  for (const std::string& s : report->ignore) std::printf(" %s", s.c_str());
  std::printf("\n");
  return 0;
}
