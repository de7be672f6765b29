// hd512 decode: 16 GQA-packed rows, 32-key tiles, 4 warps (128 head dims each), 3 stages (218 KB).
#include "kernels/attention/sm80/flash_attn_sm80.cuh"

GANNET_DEFINE_FLASH(DecodeHd512, 512, 16, 32, 1, 4, 3)
