// sm_70 (Volta) hd512 decode and prefill over an FP8 KV cache: 16 rows, 64-key tiles, 4 warps (87
// KB).
#include "kernels/attention/sm70/flash_sm70.cuh"

GANNET_DEFINE_FLASH_SM70(FlashHd512Fp8Sm70, 512, 16, 64, 1, 4, true)
