// hd512 prefill for ~100 KB shared-memory parts: 16 rows, 16-key tiles (84 KB).
#include "kernels/attention/sm80/flash_prefill_sm80.cuh"

GANNET_DEFINE_FLASH_PREFILL(PrefillHd512Small, 512, 16, 16, 1, 2, 2)
