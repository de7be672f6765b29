// hd256 decode over an FP8 KV cache: 64-key tiles (the bytes of a 32-key bf16 tile, so the fixed
// cost of a tile -- barriers, the softmax's reductions -- is spread over twice the keys), 4 warps,
// 2 FP8 stages read in place by the fp16 MMAs (~100 KB: two CTAs per H100 SM).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd256Fp8, 256, 64, 4, 2, true)
