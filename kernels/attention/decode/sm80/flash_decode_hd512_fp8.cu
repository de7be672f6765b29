// hd512 decode over an FP8 KV cache: 16-key tiles, 4 warps, 3 FP8 stages read in place by the
// fp16 MMAs (74 KB: three CTAs per H100 SM).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd512Fp8, 512, 16, 4, 3, true)
