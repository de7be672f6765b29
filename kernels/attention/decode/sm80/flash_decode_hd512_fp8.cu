// hd512 decode over an FP8 KV cache: 16-key tiles, 4 warps, 2 FP8 staging stages and one bf16
// tile (90 KB: fits the ~100 KB shared-memory parts).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd512Fp8, 512, 16, 4, 2, true)
