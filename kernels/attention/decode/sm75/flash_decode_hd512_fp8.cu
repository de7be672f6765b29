// sm_75 (Turing) hd512 decode over an FP8 KV cache: 16-key tiles, 4 warps, 2 FP8 stages (56 KB).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd512Fp8Sm75, 512, 16, 4, 2, true, 750)
