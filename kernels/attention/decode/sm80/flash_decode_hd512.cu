// hd512 decode: 32-key tiles, 4 warps (128 head dims each), 3 stages (227 KB: one CTA per H100 SM).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd512, 512, 32, 4, 3)
