// hd256 decode over an FP8 KV cache: 32-key tiles, 4 warps, 2 FP8 staging stages and one bf16
// tile (88 KB: fits the ~100 KB shared-memory parts, two CTAs per H100 SM).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd256Fp8, 256, 32, 4, 2, true)
