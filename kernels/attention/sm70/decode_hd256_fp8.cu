// sm_70 (Volta) hd256 decode/verify over an FP8 KV cache: 16 rows, 64-key tiles, 4 warps (47 KB).
#include "kernels/attention/sm70/flash_sm70.cuh"

GANNET_DEFINE_FLASH_SM70(DecodeHd256Fp8Sm70, 256, 16, 64, 1, 4, true)
