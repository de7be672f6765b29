// hd512 prefill: 64 rows, 32-key tiles, 8 warps (256 head dims each), 2 stages (206 KB).
#include "kernels/attention/sm80/flash_prefill_sm80.cuh"

GANNET_DEFINE_FLASH_PREFILL(PrefillHd512, 512, 64, 32, 4, 2, 2)
