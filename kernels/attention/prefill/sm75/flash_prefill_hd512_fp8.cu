// sm_75 (Turing) hd512 prefill over an FP8 KV cache: 16 rows, 16-key tiles, 2 warps, 2 FP8
// stages (51 KB).
#include "kernels/attention/sm80/flash_prefill_sm80.cuh"

GANNET_DEFINE_FLASH_PREFILL(PrefillHd512Fp8Sm75, 512, 16, 16, 1, 2, 2, true, 750)
