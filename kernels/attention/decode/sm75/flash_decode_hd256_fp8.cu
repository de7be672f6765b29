// sm_75 (Turing) hd256 decode over an FP8 KV cache: 32-key tiles, 4 warps, 2 FP8 stages read in
// place by fp16 MMAs (54 KB). E4M3 -> fp16 is a software conversion below sm_89.
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd256Fp8Sm75, 256, 32, 4, 2, true, 750)
