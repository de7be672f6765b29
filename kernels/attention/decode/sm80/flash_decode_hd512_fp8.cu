// hd512 decode over an FP8 KV cache: 32-key tiles (the bytes of a 16-key bf16 tile), 4 warps,
// 2 FP8 stages read in place by the fp16 MMAs (~96 KB: two CTAs per H100 SM). Against 16-key
// tiles with 3 stages: 19.6 vs 20.9 ms for a 31B batch-1 step at 100k tokens on H200.
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd512Fp8, 512, 32, 4, 2, true)
