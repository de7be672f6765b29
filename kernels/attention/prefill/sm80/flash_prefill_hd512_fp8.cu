// hd512 prefill over an FP8 KV cache: the bf16 kernel's tiles (64 rows, 32-key tiles, 8 warps),
// 2 FP8 stages read in place by fp16 MMAs (~142 KB: sm_80 and sm_90-class parts).
#include "kernels/attention/sm80/flash_prefill_sm80.cuh"

GANNET_DEFINE_FLASH_PREFILL(PrefillHd512Fp8, 512, 64, 32, 4, 2, 2, true)
