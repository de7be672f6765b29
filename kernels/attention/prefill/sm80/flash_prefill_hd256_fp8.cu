// hd256 prefill over an FP8 KV cache: the bf16 kernel's tiles (64 rows, 64-key tiles, 8 warps),
// 2 FP8 stages read in place by fp16 MMAs (~117 KB: sm_80 and sm_90-class parts).
#include "kernels/attention/sm80/flash_prefill_sm80.cuh"

GANNET_DEFINE_FLASH_PREFILL(PrefillHd256Fp8, 256, 64, 64, 4, 2, 2, true)
