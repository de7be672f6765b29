// sm_70 (Volta) hd256 prefill: 32 rows, 32-key tiles, 4 warps (53 KB).
#include "kernels/attention/sm70/flash_sm70.cuh"

GANNET_DEFINE_FLASH_SM70(PrefillHd256Sm70, 256, 32, 32, 2, 2, false)
