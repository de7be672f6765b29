// hd256 decode over an FP8 KV cache: 32-key tiles, 4 warps, 3 FP8 staging stages and one bf16
// tile (105 KB: two CTAs per H100 SM). Two tiles in flight per CTA move as many bytes as the bf16
// kernel's one, so the FP8 cache streams at the same byte rate with half the bytes per key.
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd256Fp8, 256, 32, 4, 3, true)
