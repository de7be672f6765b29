// hd512 decode over an FP8 KV cache with 16-key tiles and 2 stages (~57 KB): for parts with
// little shared memory, and the registry's alternative
// (GANNET_FORCE_KERNEL=sm80_hd512_fp8_split_small).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd512Fp8Small, 512, 16, 4, 2, true)
