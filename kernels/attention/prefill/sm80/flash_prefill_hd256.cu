// hd256 prefill: 64 rows (tokens x GQA heads), 64-key tiles, 8 warps, 2 stages (179 KB).
#include "kernels/attention/sm80/flash_prefill_sm80.cuh"

GANNET_DEFINE_FLASH_PREFILL(PrefillHd256, 256, 64, 64, 4, 2, 2)
