// hd512 decode for ~100 KB shared-memory parts: 16-key tiles, 2 warps, 2 stages (84 KB).
#include "kernels/attention/sm80/flash_attn_sm80.cuh"

GANNET_DEFINE_FLASH(DecodeHd512Small, 512, 16, 16, 1, 2, 2)
