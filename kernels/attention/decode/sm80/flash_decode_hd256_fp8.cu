// hd256 decode over an FP8 KV cache: 32-key tiles, 4 warps, 3 FP8 stages read in place by the
// fp16 MMAs (~72 KB: three CTAs per H100 SM). Measured on H200 against 64-key tiles with 2 stages
// (the bytes of a 32-key bf16 tile): 38.3 vs 40.5 ms for a 31B batch-64 step at context 1500,
// where the sliding layers dominate (docs/results-log/fp8-kv.md).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd256Fp8, 256, 32, 4, 3, true)
