// hd256 decode over an FP8 KV cache with 32-key tiles and 2 stages (~54 KB): for parts with
// little shared memory, and the registry's alternative
// (GANNET_FORCE_KERNEL=sm80_hd256_fp8_split_small).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd256Fp8Small, 256, 32, 4, 2, true)
