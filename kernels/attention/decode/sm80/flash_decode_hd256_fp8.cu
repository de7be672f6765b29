// hd256 decode over an FP8 KV cache: 32-key tiles, 4 warps, 3 FP8 stages read in place by the
// fp16 MMAs (72 KB: three CTAs per H100 SM; as many bytes in flight per SM as the bf16 kernel).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd256Fp8, 256, 32, 4, 3, true)
