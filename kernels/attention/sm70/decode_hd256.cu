// sm_70 (Volta) hd256 decode/verify: 16 rows, 32-key tiles, 2 warps (43 KB, two CTAs an SM).
#include "kernels/attention/sm70/flash_sm70.cuh"

GANNET_DEFINE_FLASH_SM70(DecodeHd256Sm70, 256, 16, 32, 1, 2, false)
