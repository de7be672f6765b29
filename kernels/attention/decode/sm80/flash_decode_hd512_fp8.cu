// hd512 decode over an FP8 KV cache: 16-key tiles, 4 warps, 3 FP8 staging stages and one bf16
// tile (107 KB: two CTAs per H100 SM; as many bytes in flight as the bf16 kernel).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd512Fp8, 512, 16, 4, 3, true)
