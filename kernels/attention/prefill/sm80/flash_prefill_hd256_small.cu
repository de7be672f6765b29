// hd256 prefill for ~100 KB shared-memory parts: 32 rows, 32-key tiles (85 KB).
#include "kernels/attention/sm80/flash_prefill_sm80.cuh"

GANNET_DEFINE_FLASH_PREFILL(PrefillHd256Small, 256, 32, 32, 2, 2, 2)
