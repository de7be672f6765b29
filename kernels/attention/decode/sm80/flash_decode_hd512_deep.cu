// hd512 decode, deep pipeline: 32-key tiles, 3 stages (227 KB, one CTA per H100 SM). Kept as a
// registry alternative (GANNET_FORCE_KERNEL=sm80_hd512_bf16_split_deep) and benchmark reference.
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd512Deep, 512, 32, 4, 3)
