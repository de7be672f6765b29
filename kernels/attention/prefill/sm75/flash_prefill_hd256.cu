// sm_75 (Turing) hd256 prefill: 32 rows, 16-key tiles, 2 x 2 warps, 2 stages (52 KB of 64 KB).
#include "kernels/attention/sm80/flash_prefill_sm80.cuh"

GANNET_DEFINE_FLASH_PREFILL(PrefillHd256Sm75, 256, 32, 16, 2, 2, 2, false, 750)
