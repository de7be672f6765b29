// sm_70 (Volta) hd256 prefill over an FP8 KV cache: 32 rows, 64-key tiles, 4 warps (57 KB).
#include "kernels/attention/sm70/flash_sm70.cuh"

GANNET_DEFINE_FLASH_SM70(PrefillHd256Fp8Sm70, 256, 32, 64, 2, 2, true)
