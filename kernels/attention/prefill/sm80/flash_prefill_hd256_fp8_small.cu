// hd256 prefill over an FP8 KV cache for ~100 KB shared-memory parts: 32 rows, 32-key tiles,
// 4 warps, 2 FP8 stages (~56 KB).
#include "kernels/attention/sm80/flash_prefill_sm80.cuh"

GANNET_DEFINE_FLASH_PREFILL(PrefillHd256Fp8Small, 256, 32, 32, 2, 2, 2, true)
