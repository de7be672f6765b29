// hd256 decode: 32-key tiles, 4 warps (64 head dims each), 2 stages (86 KB: two CTAs per H100 SM).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd256, 256, 32, 4, 2)
