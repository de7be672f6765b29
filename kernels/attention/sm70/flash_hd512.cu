// sm_70 (Volta) hd512 decode and prefill: 16 rows, 32-key tiles, 2 warps (83 KB of Volta's 96).
#include "kernels/attention/sm70/flash_sm70.cuh"

GANNET_DEFINE_FLASH_SM70(FlashHd512Sm70, 512, 16, 32, 1, 2, false)
