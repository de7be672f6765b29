// sm_75 (Turing) hd256 prefill over an FP8 KV cache: 32 rows, 32-key tiles, 2 x 2 warps, 2 FP8
// stages (55 KB).
#include "kernels/attention/sm80/flash_prefill_sm80.cuh"

GANNET_DEFINE_FLASH_PREFILL(PrefillHd256Fp8Sm75, 256, 32, 32, 2, 2, 2, true, 750)
